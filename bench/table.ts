/** Prints a right-aligned text table, columns two spaces apart (every bench and mesh script's tables). */
export function printTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (c: readonly (string | number)[]) =>
    c.map((x, i) => String(x).padStart(widths[i]!)).join('  ');
  console.log(line(header));
  for (const r of rows) console.log(line(r));
}
