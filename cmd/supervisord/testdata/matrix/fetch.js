// fetch.js: Node's built-in fetch with default options (it ignores the
// proxy variables below Node 24) reading a server-sent event stream from
// $U/sse with the placeholder in Authorization. Prints the status and
// every event's data as it arrives; exits 1 on any error.
(async () => {
  const r = await fetch(process.env.U + '/sse', { headers: { Authorization: 'Bearer ' + process.env.TOKEN } });
  console.log('status=' + r.status);
  if (r.status !== 200) process.exit(1);
  const dec = new TextDecoder();
  let buf = '';
  const events = [];
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      events.push(buf.slice(0, i).replace(/^data: /, ''));
      buf = buf.slice(i + 2);
    }
  }
  console.log('events=' + events.join(','));
})().catch((e) => { console.log('error=' + (e.cause ? e.cause.code || e.cause.message : e.message)); process.exit(1); });
