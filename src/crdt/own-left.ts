/**
 * The part of own admissions spread over `first..last` of a bucket (fractions of it) still inside
 * the window when the part `cut` of the bucket is out: 1 before the first, 0 from the last on
 * (the tolerance absorbs float error at whole-ms boundaries), in between what is left of the span.
 */
export function ownLeftAt(cut: number, first: number, last: number): number {
  return cut + 1e-9 >= last ? 0 : cut < first ? 1 : (last - cut) / (last - first);
}
