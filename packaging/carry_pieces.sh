# Sourced by packaging/carry_*.sh: the device tool takes 64 MiB a call, the checkout's own
# tree included, so a pack goes in pieces that leave room for the tree and 2 MiB to spare.
# split_for_device FILE PREFIX: writes PREFIX0, PREFIX1, ...; prints how many.
split_for_device() {
  local tree piece pieces
  tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)
  piece=$(( 64 * 1024 * 1024 - tree - 2 * 1024 * 1024 ))
  pieces=$(( ($(stat -c %s "$1") + piece - 1) / piece ))
  split -n "$pieces" -d -a 1 "$1" "$2"
  echo "$pieces"
}
