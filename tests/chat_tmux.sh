#!/bin/sh
# chat_tmux.sh CINFER MODEL TMPDIR — type a three-turn conversation into
# `cinfer chat` running in a real terminal (tmux), stop one reply with Ctrl-C,
# use /save, and check the screen.  Exit 0 on success.
set -u
bin=$1 model=$2 tmp=$3
sock="$tmp/tmux.sock"
t="tmux -S $sock"
$t new-session -d -x 200 -y 50 "$bin chat $model -n 12 --temp 0 2>&1; sleep 5" || exit 1
wait_for() { # text, seconds
  i=0; while [ $i -lt $(($2 * 10)) ]; do
    $t capture-pane -p -S -200 | grep -qF -- "$1" && return 0; sleep 0.1; i=$((i + 1)); done
  echo "timed out waiting for: $1"; $t capture-pane -p -S -200; return 1; }
count_prompts() { $t capture-pane -p -S -200 | grep -c '^>'; }
fail() { $t kill-server 2>/dev/null; exit 1; }
wait_prompts() { # n: wait until n prompt lines are on screen (30 s)
  i=0; while [ "$(count_prompts)" -lt "$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  [ "$(count_prompts)" -ge "$1" ] || { echo "expected $1 prompts"; $t capture-pane -p -S -200; return 1; }; }
wait_prompts 1 || fail
$t send-keys "Hello" Enter; sleep 0.2
wait_prompts 2 || fail
$t send-keys "How are you?" Enter
$t send-keys C-c   # stops the reply (or is harmless if it already ended)
wait_prompts 3 || fail
$t send-keys "/save $tmp/chat.sess" Enter
wait_for "saved to" 30 || fail
$t send-keys "Bye" Enter
wait_prompts 5 || fail
$t send-keys "/quit" Enter
sleep 0.5
[ -f "$tmp/chat.sess" ] && [ -f "$tmp/chat.sess.json" ] || { echo "no session file"; fail; }
$t kill-server 2>/dev/null
exit 0
