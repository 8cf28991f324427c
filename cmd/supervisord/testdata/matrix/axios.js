// axios.js: axios with default options (it reads the proxy variables
// itself) from the lockfile's node_modules in $CLIENTS, the placeholder in
// Authorization. Prints the status and body; exits 1 on any error.
const axios = require('module').createRequire(process.env.CLIENTS + '/package.json')('axios');
axios.get(process.env.U + '/axios', { headers: { Authorization: 'Bearer ' + process.env.TOKEN }, timeout: 30000 })
  .then((r) => { console.log('status=' + r.status + ' body=' + String(r.data).trim()); })
  .catch((e) => { console.log('error=' + (e.response ? 'status ' + e.response.status : e.code || e.message)); process.exit(1); });
