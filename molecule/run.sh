#!/usr/bin/env bash
# Run Molecule scenarios phase by phase (the scenario's own test_sequence) and print how long each
# phase took. On a failure the scenario is destroyed and the script exits non-zero.
set -uo pipefail
cd "$(dirname "$0")/.."
report=()
status=0
for scenario in "$@"; do
  sequence=$(python3 - "$scenario" <<'PY'
import sys, yaml
conf = yaml.safe_load(open(f"molecule/{sys.argv[1]}/molecule.yml"))
print(" ".join(conf["scenario"]["test_sequence"]))
PY
) || { echo "cannot read molecule/$scenario/molecule.yml"; exit 2; }
  line="$scenario:"
  total_start=$(date +%s)
  for phase in $sequence; do
    start=$(date +%s)
    if ! molecule "$phase" -s "$scenario"; then
      echo "molecule: $scenario failed in phase $phase"
      molecule destroy -s "$scenario" >/dev/null 2>&1
      status=1
      line="$line $phase=FAILED"
      break
    fi
    line="$line $phase=$(( $(date +%s) - start ))s"
  done
  report+=("$line total=$(( $(date +%s) - total_start ))s")
  [ "$status" = 0 ] || break
done
echo
echo "Molecule phase timings:"
printf '  %s\n' "${report[@]}"
exit "$status"
