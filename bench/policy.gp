# Draws shmsem_policy_bench --dat output: bounded against strict FIFO against
# sem_t (and the ticket fair floor), N = 1, K = 2, 4, 8; throughput and worst
# wait, unpinned (left) and pinned (right).
# Usage: gnuplot -e "dat='FILE'; shape='1clk'; out='DIR/policy_SHAPE'" bench/policy.gp
# Writes out.'_throughput.png' and out.'_worst_wait.png'.
if (!exists("shape")) shape = "1clk"
sel(pin, who) = sprintf("< awk '$2==1 && $3==%d && $4==\"%s\" && $5==\"%s\"' %s", pin, shape, who, dat)
set terminal pngcairo size 1100,450 font ",10"
set logscale xy
set xtics ("2" 2, "4" 4, "8" 8)
set xrange [1.7:9.5]
set grid
set key bottom left font ",9"
set xlabel "K processes (N = 1)"

set output out."_throughput.png"
set multiplot layout 1,2 title "Throughput, ".shape." loop (median of interleaved windows; bars: min-max)"
do for [pin=0:1] {
  set title (pin ? "pinned" : "unpinned")
  set ylabel "M acquire/release pairs per second"
  plot sel(pin, "sem_t") using 1:6:7:8 with yerrorlines lw 2 title "glibc sem\\_t", \
       sel(pin, "bounded") using 1:6:7:8 with yerrorlines lw 2 title "shmsem bounded (1 ms)", \
       sel(pin, "fifo") using 1:6:7:8 with yerrorlines lw 2 title "shmsem strict FIFO", \
       sel(pin, "ticket") using 1:6:7:8 with yerrorlines lw 1 dt 2 title "ticket (fair floor)"
}
unset multiplot

set output out."_worst_wait.png"
set multiplot layout 1,2 title "Worst single wait over all windows, ".shape." loop"
do for [pin=0:1] {
  set title (pin ? "pinned" : "unpinned")
  set ylabel "ms"
  plot sel(pin, "sem_t") using 1:($10/1000) with linespoints lw 2 title "glibc sem\\_t", \
       sel(pin, "bounded") using 1:($10/1000) with linespoints lw 2 title "shmsem bounded (1 ms)", \
       sel(pin, "fifo") using 1:($10/1000) with linespoints lw 2 title "shmsem strict FIFO", \
       sel(pin, "ticket") using 1:($10/1000) with linespoints lw 1 dt 2 title "ticket (fair floor)"
}
unset multiplot
