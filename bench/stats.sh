# bench/stats.sh: the check of how many rounds a bench script is asked for, and the medians of
# rounds that are no training runs (bench/cpu_copies.sh and bench/floor_share.sh: paired ratios of
# steps and copies), defined once. Sourced (`. bench/stats.sh`), not run. The statistics of
# repeated training runs are `hogwild sweep` and `hogwild compare`'s (mean, sd, 95% interval,
# speed-up, Welch's test): bench/accuracy.sh, bench/compare_modes.sh and bench/two_workers.sh use
# those.

# count_arg NAME VALUE: exits 2, naming NAME, unless VALUE is a whole number, 1 or more, without
# leading zeros (a script's ROUNDS or RUNS: 0 or a word once printed a whole table of nan).
count_arg() {
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || {
        echo "$1 must be a whole number, 1 or more, without leading zeros; got '$2'" >&2
        exit 2
    }
}

# median: the median of the numbers on stdin, one a line, blank lines skipped ("nan" when there are
# none). The mean of the middle two is printed to 10 digits: awk's default, 6, printed 1234567.5 as
# 1.23457e+06.
median() {
    sort -g | awk -v OFMT=%.10g 'NF {a[++n]=$1}
        END {if (n==0) print "nan"; else if (n%2) print a[(n+1)/2]; else print (a[n/2]+a[n/2+1])/2}'
}

# median_range FORMAT: the numbers on stdin as FORMAT (printf's) of their median, least and largest,
# e.g. "%.2fx (%.2f-%.2f)"; "nan" when there are none.
median_range() {
    sort -g | awk -v format="$1" 'NF {a[++n]=$1}
        END {if (n==0) {print "nan"; exit} m = (n%2) ? a[(n+1)/2] : (a[n/2]+a[n/2+1])/2; printf format, m, a[1], a[n]}'
}
