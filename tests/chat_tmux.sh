#!/bin/sh
# chat_tmux.sh CINFER MODEL TMPDIR — `cinfer chat` in a real terminal (tmux):
#   1. the one-line banner (model, context, /help);
#   2. line editing: Left Left inside "Hello" inserts there (the prompt the
#      template renders, --show-prompt, holds "HelXlo"; no "^[[D" on screen);
#   3. /help (reached with Tab completion of "/he") lists every command;
#   4. a three-turn conversation, one reply stopped with Ctrl-C, /save;
#   5. Ctrl-D leaves with a newline (the next output starts its own line);
#   6. a second session: Up recalls the last line of the first (history in
#      $XDG_CACHE_HOME/cinfer/chat_history).
# Exit 0 on success.
set -u
bin=$1 model=$2 tmp=$3
export XDG_CACHE_HOME="$tmp/xdg"
n_start=0
start() { # a fresh tmux server (a socket of its own) running chat, then a marker line
  [ -n "${t:-}" ] && $t kill-server 2>/dev/null
  n_start=$((n_start + 1))
  t="tmux -S $tmp/tmux$n_start.sock"
  $t new-session -d -x 200 -y 50 \
    "XDG_CACHE_HOME='$XDG_CACHE_HOME' $bin chat $model -n 12 --temp 0 --show-prompt 2>&1; echo CHAT-EXITED; sleep 30" || exit 1
}
screen() { $t capture-pane -p -S -400; }
wait_for() { # text, seconds
  i=0; while [ $i -lt $(($2 * 10)) ]; do
    screen | grep -qF -- "$1" && return 0; sleep 0.1; i=$((i + 1)); done
  echo "timed out waiting for: $1"; screen; return 1; }
count_prompts() { screen | grep -c '^>'; }
fail() { echo "FAIL: $*"; screen; $t kill-server 2>/dev/null; exit 1; }
wait_prompts() { # n: wait until n prompt lines are on screen (30 s)
  i=0; while [ "$(count_prompts)" -lt "$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  [ "$(count_prompts)" -ge "$1" ] || fail "expected $1 prompts"; }

start
wait_prompts 1
screen | grep -q "^cinfer chat: .*qwen3.*4096-token context.*/help" || fail "no banner"
$t send-keys "Hello" Left Left "X" Enter
wait_prompts 2
screen | grep -qF "HelXlo<|im_end|>" || fail "Left Left did not move the cursor"
screen | grep -qF "^[[D" && fail "arrow keys inserted escape codes"
$t send-keys "/he" Tab Enter
wait_for "Ctrl-D on an empty line" 10 || fail "no /help"
for c in /help /reset /save /load /exit; do
  screen | grep -q "^  $c" || fail "/help does not list $c"
done
wait_prompts 3
$t send-keys "How are you?" Enter
$t send-keys C-c   # stops the reply (or is harmless if it already ended)
wait_prompts 4
$t send-keys "/save $tmp/chat.sess" Enter
wait_for "saved to" 30 || fail "no /save"
$t send-keys "Bye" Enter
wait_prompts 6
$t send-keys C-d
wait_for "CHAT-EXITED" 10 || fail "Ctrl-D did not leave"
screen | grep -q "^CHAT-EXITED" || fail "no newline after Ctrl-D"
[ -f "$tmp/chat.sess" ] && [ -f "$tmp/chat.sess.json" ] || fail "no session file"
grep -qx "Bye" "$XDG_CACHE_HOME/cinfer/chat_history" || fail "history file lacks the last line"

start
wait_prompts 1
$t send-keys Up Enter
wait_for "Bye<|im_end|>" 30 || fail "Up did not recall the previous session's last line"
$t send-keys "/exit" Enter
wait_for "CHAT-EXITED" 10 || fail "/exit did not leave"
$t kill-server 2>/dev/null
exit 0
