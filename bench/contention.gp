# One PNG, two panels: a metric of scenario (c) against K, unpinned left,
# pinned right, one line per contender. Called by bench/plot.py, which sets:
#   out          the PNG to write
#   dat0, dat1   data files (pin:0, pin:1): a header line "K name name ...",
#                then one row per K; "?" where the run has no value
#   ncols        columns in them (K plus one per contender)
#   title0, title1, suptitle, note   panel titles, figure title, footer
#   yfmt         y tic format; ymin, ymax: y range (the same for both panels)
#   ktics        the K values, comma-separated; kmin, kmax: the first and last
set terminal pngcairo size 1400,560 font "sans,10" noenhanced
set output out
set datafile missing "?"
set logscale x 2
set logscale y 10
set xrange [kmin / 1.25 : kmax * 1.25]
eval "set xtics (" . ktics . ")"
set yrange [ymin : ymax]
set format y yfmt
set grid xtics ytics mytics lc rgb "#dddddd"
set xlabel "K (contending processes)"
# One key for both panels, in two rows under them (inside, it would hide data).
set key at screen 0.5, 0.075 center center horizontal maxrows 2 Left reverse font ",10" samplen 2 width 0
# Okabe-Ito colours (distinguishable with the common colour-vision
# deficiencies), in report.py's contender order: shmsem first.
set linetype 1 lc rgb "#D55E00"
set linetype 2 lc rgb "#0072B2"
set linetype 3 lc rgb "#56B4E9"
set linetype 4 lc rgb "#009E73"
set linetype 5 lc rgb "#CC79A7"
set linetype 6 lc rgb "#E69F00"
set linetype 7 lc rgb "#000000"
set linetype 8 lc rgb "#999999"

set multiplot layout 1, 2 title suptitle font ",11" margins 0.07, 0.98, 0.22, 0.88 spacing 0.06
set label 1 note at screen 0.5, 0.02 center font ",8"
set title title0
plot for [i=2:ncols] dat0 using 1:i with linespoints lt i-1 lw 2 pt i-1 ps 1.3 title columnheader(i)
unset label 1
unset key
set title title1
plot for [i=2:ncols] dat1 using 1:i with linespoints lt i-1 lw 2 pt i-1 ps 1.3 title columnheader(i)
unset multiplot
