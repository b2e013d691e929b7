# bench/stats.sh: the statistics the bench scripts print, defined once. Sourced (`. bench/stats.sh`),
# not run.

# median: the median of the numbers on stdin, one a line ("nan" when there are none).
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# median_range FORMAT: the numbers on stdin as FORMAT (printf's) of their median, least and largest,
# e.g. "%.2fx (%.2f-%.2f)"; "nan" when there are none.
median_range() {
    sort -g | awk -v format="$1" '{a[NR]=$1}
        END {if (NR==0) {print "nan"; exit} m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf format, m, a[1], a[NR]}'
}
