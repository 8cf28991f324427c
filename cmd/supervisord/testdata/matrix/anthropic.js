// anthropic.js: @anthropic-ai/sdk with default options (key from
// ANTHROPIC_API_KEY, base URL from ANTHROPIC_BASE_URL; no retries, so a
// failure is quick) streaming a message, on Node 22 from the lockfile's
// node_modules in $CLIENTS. Prints the streamed text; exits 1 on any error.
const Anthropic = require('module').createRequire(process.env.CLIENTS + '/package.json')('@anthropic-ai/sdk');
(async () => {
  const client = new Anthropic({ maxRetries: 0, timeout: 30000 });
  const stream = await client.messages.create({ model: 'claude-test', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }], stream: true });
  let text = '';
  for await (const ev of stream) if (ev.type === 'content_block_delta') text += ev.delta.text;
  console.log('text=' + text);
})().catch((e) => { console.log('error=' + (e.status || (e.cause && (e.cause.code || e.cause.message)) || e.message)); process.exit(1); });
