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
// requests when DEMO_PYTHON is set) through egressd. It only ever holds
// the placeholder; every tool reads the proxy and CA variables supervisord
// set. It prints one line per request: tool, URL, whether it carried the
// placeholder, status and egressd's X-Hostkit-Error code.
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
if [ -n "$DEMO_PYTHON" ]; then
	/usr/bin/python3 agent.py 2>&1 | tail -n 3
fi
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

// writeAgent writes the agent's files into dir (readable by an agent uid).
func writeAgent(dir string, python bool) error {
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(agentScript), 0o644); err != nil {
		return err
	}
	if python {
		return os.WriteFile(filepath.Join(dir, "agent.py"), []byte(agentPython), 0o644)
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

var resultRE = regexp.MustCompile(`^agent: (curl|python) (\S+) \((with|without) the placeholder\) -> (\d*) ?(\S*)$`)
var placeholderRE = regexp.MustCompile(`\bhkp_[a-z2-7]{32}\b`)
var uidRE = regexp.MustCompile(`^agent: I run as uid (\d+);`)
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
	done         bool
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
