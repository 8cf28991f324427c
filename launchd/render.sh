#!/bin/sh
# render.sh renders hostkit's launchd user agents for a binary directory.
#
#   launchd/render.sh BINDIR OUTDIR
#
# It writes io.hostkit.{secretd,egressd,supervisord}.plist into OUTDIR with
# @BINDIR@ replaced by BINDIR, @HOME@ by $HOME and @TMPDIR@ by the per-user
# temporary directory (`getconf DARWIN_USER_TEMP_DIR` on macOS, else
# $TMPDIR). HOSTKIT_HOME and HOSTKIT_TMPDIR override the last two (tests).
# It never loads anything: docs/operators.md says how to install and
# bootstrap the agents (launchctl bootstrap gui/$(id -u) ...).
set -eu

usage() {
	echo "usage: $0 BINDIR OUTDIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
bindir=$1
outdir=$2
case $bindir in
/*) ;;
*) echo "render.sh: BINDIR must be an absolute path, got '$bindir'" >&2; exit 2 ;;
esac
bindir=${bindir%/}

home=${HOSTKIT_HOME:-${HOME:-}}
tmp=${HOSTKIT_TMPDIR:-}
if [ -z "$tmp" ] && command -v getconf >/dev/null 2>&1; then
	tmp=$(getconf DARWIN_USER_TEMP_DIR 2>/dev/null || true)
fi
tmp=${tmp:-${TMPDIR:-}}
tmp=${tmp%/}
[ -n "$home" ] || { echo "render.sh: HOME is not set" >&2; exit 1; }
[ -n "$tmp" ] || { echo "render.sh: no per-user TMPDIR (set HOSTKIT_TMPDIR)" >&2; exit 1; }

for b in secretd egressd supervisord; do
	[ -x "$bindir/$b" ] || { echo "render.sh: $bindir/$b is not an executable" >&2; exit 1; }
done

# esc makes $1 safe inside a plist <string> and in a sed replacement.
esc() {
	printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' \
		-e 's/[\\|&]/\\&/g'
}
b=$(esc "$bindir")
h=$(esc "$home")
t=$(esc "$tmp")

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$outdir"
for name in secretd egressd supervisord; do
	src="$here/io.hostkit.$name.plist"
	dst="$outdir/io.hostkit.$name.plist"
	sed -e "s|@BINDIR@|$b|g" -e "s|@HOME@|$h|g" -e "s|@TMPDIR@|$t|g" "$src" >"$dst.tmp"
	if grep -q '@[A-Z]*@' "$dst.tmp"; then
		echo "render.sh: $dst: unrendered placeholder" >&2
		rm -f "$dst.tmp"
		exit 1
	fi
	chmod 0644 "$dst.tmp"
	mv "$dst.tmp" "$dst"
	echo "$dst"
done
