#!/bin/sh
# Checks the generator's claim that the optimum of each instance is known:
# the plan it was cut from (--plan) passes the oracle's interval checker at a
# peak of 1 MiB, the capacity, and that is also the instance's lower bound.
# The plan is of the very instances bench/run plans (the same rows without
# the offset column).  Last, a control: one block moved up 1 KiB must fail.
#
#   check_gen_intervals.sh GEN_INTERVALS TGSCHED WORK_DIR
set -eu
gen=$1 cli=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir/plans" "$dir/problems"
for first in 1000 5000; do # the first seeds of the tune and report sets
    "$gen" --seed $first --count 20 --out "$dir/plans" --plan
    "$gen" --seed $first --count 20 --out "$dir/problems"
done
n=0
for f in "$dir"/plans/gen-*.csv; do
    name=$(basename "$f")
    if ! cut -d, -f1-4 "$f" | cmp -s - "$dir/problems/$name"; then
        echo "$name: the plan's rows differ from the instance's" >&2
        exit 1
    fi
    out=$("$cli" check "$f" --capacity 1048576 --json) || {
        echo "$name: the generated plan fails the check: $out" >&2
        exit 1
    }
    case $out in
    *'"lower_bound":1048576,'*'"peak":1048576,'*'"violations":0,'*) n=$((n + 1)) ;;
    *)
        echo "$name: lower bound or peak not 1048576: $out" >&2
        exit 1
        ;;
    esac
done
# the control: block 0 moved up by 1 KiB overlaps a neighbour or passes the capacity
moved="$dir/moved.csv"
awk -F, 'BEGIN { OFS = "," } NR == 2 { $5 += 1024 } { print }' "$dir/plans/gen-1000.csv" >"$moved"
if "$cli" check "$moved" --capacity 1048576 >/dev/null; then
    echo "control: a block moved by 1 KiB still passes the check" >&2
    exit 1
fi
echo "$n generated plans legal at their lower bound, 1048576 bytes; the moved block is caught"
