#!/bin/sh
# A stand-in coding agent for the example tournament: each candidate (by its index)
# behaves like a different kind of agent, making real edits to the repository it runs in.
#   0: fixes the bug          1: "fixes" it by breaking another function
#   2: changes nothing        3: makes the same fix as candidate 0 (a second vote)
set -e
echo "agent $ARBITER_CANDIDATE_ID reading $ARBITER_PROMPT_FILE"
head -n 3 "$ARBITER_PROMPT_FILE"
case "$ARBITER_CANDIDATE_INDEX" in
  0|3) sed -i 's/return a - b  # add/return a + b  # add/' calc.py ;;
  1)   sed -i 's/return a - b  # add/return a + b  # add/; s/return a \* b/return a + b/' calc.py ;;
  2)   echo "I could not find the problem." ;;
esac
