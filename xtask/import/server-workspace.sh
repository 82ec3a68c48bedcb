# Sourced by the profile scripts: with T (tree), B (binaries) and PORT set, a fresh data root
# and server in a temporary directory W (removed on exit, the server SP stopped), a workspace
# W/ws with TREE copied in and flushed, and the shell in it.
W=$(mktemp -d); trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf $W' EXIT
$B/scribe-server init --data $W/d >/dev/null; $B/scribe-server repo create r --data $W/d >/dev/null
$B/scribe-server serve --data $W/d --listen 127.0.0.1:$PORT --runtime-dir $W/r > $W/server.log 2>&1 &
SP=$!
for i in $(seq 50); do $B/scribe workspace create $W/ws --server scribe://127.0.0.1:$PORT --repo r >/dev/null 2>&1 && break; sleep 0.2; done
cp -a $T/. $W/ws/; sync; cd $W/ws
