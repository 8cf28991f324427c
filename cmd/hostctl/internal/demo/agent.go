package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// tokenEnv is the agent's environment variable for the demo-api credential.
const tokenEnv = "DEMO_API_TOKEN"

// doneLine is the agent's last line before it idles (so its bundle lives
// until the demo has read egressd's byte count).
const doneLine = "agent: done"

// agentScript is the agent: a shell script that runs curl (and Python's
// requests when DEMO_PYTHON is set) through egressd, then, when DEMO_NODE
// names a Node.js, Node's built-in fetch with the proxy variables unset. It only
// ever holds the placeholder; curl and requests read the proxy and CA
// variables supervisord set, Node only the CA one. It prints one line per
// request: tool, URL, whether it carried the placeholder, status and
// egressd's X-Hostkit-Error code.
const agentScript = `#!/bin/sh
# hostkit demo agent: it holds only a placeholder and reaches the network through egressd.
echo "agent: I run as uid $(id -u); my environment has DEMO_API_TOKEN=$DEMO_API_TOKEN"
call() { # label url with|without
	if [ "$3" = with ]; then
		out=$(/usr/bin/curl -sS -o /dev/null -D - -w 'status=%{http_code}\n' --max-time 20 \
			-H "Authorization: Bearer $DEMO_API_TOKEN" "$2" 2>&1)
	else
		out=$(/usr/bin/curl -sS -o /dev/null -D - -w 'status=%{http_code}\n' --max-time 20 "$2" 2>&1)
	fi
	status=$(printf '%s\n' "$out" | sed -n 's/^status=//p')
	code=$(printf '%s\n' "$out" | sed -n 's/^[Xx]-[Hh]ostkit-[Ee]rror:[[:space:]]*//p' | tr -d '\r')
	echo "agent: $1 $2 ($3 the placeholder) -> $status${code:+ $code}"
}
call curl "$DEMO_API_URL/v1/hello" with
call curl "$DEMO_OTHER_URL/hello" without
call curl "$DEMO_OTHER_URL/collect" with
# A streamed answer, as LLM APIs send: each event is stamped as it arrives.
/usr/bin/curl -sS -N --max-time 20 -H "Authorization: Bearer $DEMO_API_TOKEN" "$DEMO_API_URL` + streamPath + `" |
while IFS= read -r line; do
	case "$line" in data:*) echo "agent: event at $(date +%s%N) $line" ;; esac
done
if [ -n "$DEMO_NODE" ]; then
	# Node 20's fetch ignores the proxy variables anyway; unsetting them
	# leaves no doubt that only the namespace's transparent path is left.
	# It runs beside Python (each starts slowly; their lines differ).
	env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy -u ALL_PROXY -u all_proxy \
		"$DEMO_NODE" agent.js 2>&1 | tail -n 5 &
	node_pid=$!
fi
if [ -n "$DEMO_PYTHON" ]; then
	/usr/bin/python3 agent.py 2>&1 | tail -n 3
fi
[ -z "$node_pid" ] || wait "$node_pid"
sleep 300 &
echo "` + doneLine + `"
wait
`

// agentPython is the optional Python step: requests honours HTTPS_PROXY
// and REQUESTS_CA_BUNDLE from the environment.
const agentPython = `import os, requests
url = os.environ["DEMO_API_URL"] + "/v1/python"
r = requests.get(url, headers={"Authorization": "Bearer " + os.environ["DEMO_API_TOKEN"]}, timeout=20)
code = r.headers.get("X-Hostkit-Error")
print("agent: python %s (with the placeholder) -> %d%s" % (url, r.status_code, " " + code if code else ""))
`

// DefaultNode is the Node.js the agent runs unless Config.Node names
// another (18 or later: the built-in fetch).
const DefaultNode = "/usr/bin/node"

// nodePath is the URL path of the Node step's request to the demo API.
const nodePath = "/v1/node"

// agentNode is the Node step: the built-in fetch (undici), which reads no
// proxy variable, run with none set. It trusts egressd's CA through
// NODE_EXTRA_CA_CERTS, which supervisord set. It prints which proxy
// variables it sees and what the API's name resolves to (the namespace's
// resolver answers a synthetic address), then one line per request as the
// shell agent does: to the API, and the placeholder to the other server.
const agentNode = `const dns = require("node:dns").promises;
const proxy = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"].filter((k) => process.env[k]);
async function call(url) {
  let out;
  try {
    const r = await fetch(url, { headers: { Authorization: "Bearer " + process.env.DEMO_API_TOKEN }, signal: AbortSignal.timeout(20000) });
    await r.text();
    const code = r.headers.get("x-hostkit-error");
    out = r.status + (code ? " " + code : "");
  } catch (e) {
    out = "error:" + ((e.cause && e.cause.code) || e.name);
  }
  console.log("agent: node " + url + " (with the placeholder) -> " + out);
}
(async () => {
  const host = new URL(process.env.DEMO_API_URL).hostname;
  let addr;
  try {
    addr = (await dns.lookup(host, { family: 4 })).address;
  } catch (e) {
    addr = "error:" + e.code;
  }
  console.log("agent: node " + process.version + " fetch, proxy variables set: " + (proxy.join(",") || "none") + "; " + host + " resolves to " + addr);
  await call(process.env.DEMO_API_URL + "` + nodePath + `");
  await call(process.env.DEMO_OTHER_URL + "/collect");
})();
`

// writeAgent writes the agent's files into dir (readable by an agent uid).
func writeAgent(dir string, python, node bool) error {
	files := map[string]string{"agent.sh": agentScript}
	if python {
		files["agent.py"] = agentPython
	}
	if node {
		files["agent.js"] = agentNode
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// havePythonRequests reports whether /usr/bin/python3 can import requests.
func havePythonRequests() bool {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		return false
	}
	return exec.Command("/usr/bin/python3", "-c", "import requests").Run() == nil
}

// result is one request line of the agent's output.
type result struct {
	tool, url, with, status, code string
}

var resultRE = regexp.MustCompile(`^agent: (curl|python|node) (\S+) \((with|without) the placeholder\) -> (\d*) ?(\S*)$`)
var placeholderRE = regexp.MustCompile(`\bhkp_[a-z2-7]{32}\b`)
var uidRE = regexp.MustCompile(`^agent: I run as uid (\d+);`)
var nodeRE = regexp.MustCompile(`^agent: node (v\S+) fetch, proxy variables set: (\S+); \S+ resolves to (\S+)$`)
var eventRE = regexp.MustCompile(`^agent: event at (\d+) data: \{"i":(\d+),"sent":(\d+)\}$`)

// event is one server-sent event as the agent read it: its index, and
// when the API sent it and the agent read it (Unix ns).
type event struct {
	i          int
	sent, read int64
}

// agentView is what the demo parses from the agent's output.
type agentView struct {
	lines        []string
	uid          string
	placeholders []string // every placeholder printed
	results      []result
	events       []event
	node         nodeView
	done         bool
}

// nodeView is what the Node step said about itself.
type nodeView struct {
	version string // "" when the Node step printed nothing
	proxy   string // the proxy variables it saw: "none", or their names
	addr    string // what the API's name resolved to, or error:CODE
}

func parseAgent(out string) agentView {
	var v agentView
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if l == "" {
			continue
		}
		v.lines = append(v.lines, l)
		v.placeholders = append(v.placeholders, placeholderRE.FindAllString(l, -1)...)
		if m := uidRE.FindStringSubmatch(l); m != nil {
			v.uid = m[1]
		}
		if m := resultRE.FindStringSubmatch(l); m != nil {
			v.results = append(v.results, result{tool: m[1], url: m[2], with: m[3], status: m[4], code: m[5]})
		}
		if m := eventRE.FindStringSubmatch(l); m != nil {
			read, _ := strconv.ParseInt(m[1], 10, 64)
			i, _ := strconv.Atoi(m[2])
			sent, _ := strconv.ParseInt(m[3], 10, 64)
			v.events = append(v.events, event{i: i, sent: sent, read: read})
		}
		if m := nodeRE.FindStringSubmatch(l); m != nil {
			v.node = nodeView{version: m[1], proxy: m[2], addr: m[3]}
		}
		if l == doneLine {
			v.done = true
		}
	}
	return v
}

// find returns the result of tool for a URL under origin with the given
// placeholder use.
func (v agentView) find(tool, origin, with string) (result, bool) {
	for _, r := range v.results {
		if r.tool == tool && strings.HasPrefix(r.url, origin+"/") && r.with == with {
			return r, true
		}
	}
	return result{}, false
}
