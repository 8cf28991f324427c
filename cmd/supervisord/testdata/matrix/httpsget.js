// httpsget.js: Node's https.get with default options (no agent: it
// ignores the proxy variables below Node 24), the placeholder in
// Authorization. Prints the status and body; exits 1 on any error.
const https = require('https');
https.get(process.env.U + '/https-get', { headers: { Authorization: 'Bearer ' + process.env.TOKEN } }, (res) => {
  let b = '';
  res.on('data', (d) => { b += d; });
  res.on('end', () => { console.log('status=' + res.statusCode + ' body=' + b.trim()); process.exit(res.statusCode === 200 ? 0 : 1); });
}).on('error', (e) => { console.log('error=' + (e.code || e.message)); process.exit(1); });
