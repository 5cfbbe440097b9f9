/** A binary min-heap of timed callbacks; ties run in insertion order. */
export class EventQueue {
  private times: number[] = [];
  private seqs: number[] = [];
  private fns: (() => void)[] = [];
  private seq = 0;

  get size(): number {
    return this.times.length;
  }

  push(time: number, fn: () => void): void {
    const { times, seqs, fns } = this;
    let i = times.length;
    const sq = this.seq++;
    times.push(time);
    seqs.push(sq);
    fns.push(fn);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (times[p]! < time || (times[p] === time && seqs[p]! < sq)) break;
      times[i] = times[p]!;
      seqs[i] = seqs[p]!;
      fns[i] = fns[p]!;
      i = p;
    }
    times[i] = time;
    seqs[i] = sq;
    fns[i] = fn;
  }

  peekTime(): number {
    return this.times.length > 0 ? this.times[0]! : Number.POSITIVE_INFINITY;
  }

  /** Remove the earliest event and return its callback. */
  pop(): () => void {
    const { times, seqs, fns } = this;
    const top = fns[0]!;
    const lt = times.pop()!;
    const ls = seqs.pop()!;
    const lf = fns.pop()!;
    const n = times.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        let m = l;
        if (r < n && (times[r]! < times[l]! || (times[r] === times[l] && seqs[r]! < seqs[l]!))) m = r;
        if (times[m]! > lt || (times[m] === lt && seqs[m]! > ls)) break;
        times[i] = times[m]!;
        seqs[i] = seqs[m]!;
        fns[i] = fns[m]!;
        i = m;
      }
      times[i] = lt;
      seqs[i] = ls;
      fns[i] = lf;
    }
    return top;
  }
}
