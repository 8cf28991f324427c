// openai.js: the openai SDK with default options (key from
// OPENAI_API_KEY, base URL from OPENAI_BASE_URL; no retries, so a failure
// is quick) streaming a chat completion, on Node 22 from the lockfile's
// node_modules in $CLIENTS. Prints the streamed text; exits 1 on any error.
const OpenAI = require('module').createRequire(process.env.CLIENTS + '/package.json')('openai');
(async () => {
  const client = new OpenAI({ maxRetries: 0, timeout: 30000 });
  const stream = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0].delta.content || '';
  console.log('text=' + text);
})().catch((e) => { console.log('error=' + (e.status || (e.cause && (e.cause.code || e.cause.message)) || e.message)); process.exit(1); });
