// undici-stream.mjs: a streaming POST through the proxy that https_proxy
// names, made with undici@6's EnvHttpProxyAgent on the system Node (18 or
// later; Node's own fetch ignores proxy variables before Node 24).
//
// Usage: node undici-stream.mjs fetch|stream URL 'Header: value'...
// Mode fetch reads undici.fetch's body stream; mode stream uses
// undici.stream with a Writable. The CA is NODE_EXTRA_CA_CERTS. Prints
// every server-sent event's data as one line as it arrives; exits 1 on any
// error or a status other than 200.
import { EnvHttpProxyAgent, fetch, stream } from 'undici';
import { Writable } from 'node:stream';

const [mode, url, ...headerArgs] = process.argv.slice(2);
if (!['fetch', 'stream'].includes(mode) || !url) {
  console.error('usage: undici-stream.mjs fetch|stream URL [Header: value]...');
  process.exit(2);
}
const headers = { 'content-type': 'application/json', accept: 'text/event-stream' };
for (const h of headerArgs) {
  const i = h.indexOf(':');
  headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
}
const body = JSON.stringify({ model: 'test', stream: true, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
const dispatcher = new EnvHttpProxyAgent();

// lines splits text chunks into lines and prints each "data:" line's value.
let rest = '';
function lines(text) {
  rest += text;
  let nl;
  while ((nl = rest.indexOf('\n')) >= 0) {
    const line = rest.slice(0, nl).replace(/\r$/, '');
    rest = rest.slice(nl + 1);
    if (line.startsWith('data:')) process.stdout.write(line.slice(5).trim() + '\n');
  }
}

try {
  if (mode === 'fetch') {
    const res = await fetch(url, { method: 'POST', headers, body, dispatcher });
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    const dec = new TextDecoder();
    for await (const chunk of res.body) lines(dec.decode(chunk, { stream: true }));
  } else {
    const dec = new TextDecoder();
    await stream(url, { method: 'POST', headers, body, dispatcher }, ({ statusCode }) => {
      if (statusCode !== 200) throw new Error(`status ${statusCode}`);
      return new Writable({
        write(chunk, _enc, cb) {
          lines(dec.decode(chunk, { stream: true }));
          cb();
        },
      });
    });
  }
  if (rest !== '') throw new Error(`the answer ended inside a line: ${JSON.stringify(rest)}`);
} catch (err) {
  console.error('undici-stream:', err);
  process.exit(1);
}
await dispatcher.close();
