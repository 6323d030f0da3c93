# bench/perl-hash.pl: a Perl program whose frees reach the slab layer in bulk (docs/benchmarks.md,
# "A slab's freelist walk at each free").  A 1M-entry hash of small arrays and hashes, emptied,
# then string work on what it freed:
#   LD_PRELOAD=build/lib/libprudence-malloc.so /usr/bin/time perl bench/perl-hash.pl
use strict;
use warnings;
my %h;
for my $i (1 .. 1000000) { $h{"k$i"} = [$i, "x" x ($i % 50), {a => $i}]; }
my $c = 0;
for my $k (keys %h) { $c++ if $h{$k}[0] % 3 == 0 }
%h = ();
print "$c\n";
my $t = "abc" x 2000000;
$t =~ s/b/BB/g;
my %w;
$w{$_}++ for split //, substr($t, 0, 3000000);
print length($t), "\n";
