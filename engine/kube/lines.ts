/**
 * A watch stream's lines, from the chunks the response delivers. Each chunk is scanned once:
 * a line that spans chunks is joined when its end arrives, so a CocoonSet event of a few
 * hundred kilobytes costs one copy, not one per chunk (appending to one string and searching
 * it from the start flattened the whole line again on every chunk).
 */
export class LineSplitter {
  /** The pieces of the line not ended yet. */
  private pending: string[] = [];

  /** The lines `chunk` ends, without their newline; the text after the last one is kept. */
  push(chunk: string): string[] {
    const lines: string[] = [];
    let from = 0;
    let nl: number;
    while ((nl = chunk.indexOf("\n", from)) >= 0) {
      const piece = chunk.slice(from, nl);
      if (this.pending.length === 0) lines.push(piece);
      else {
        this.pending.push(piece);
        lines.push(this.pending.join(""));
        this.pending = [];
      }
      from = nl + 1;
    }
    if (from < chunk.length) this.pending.push(from === 0 ? chunk : chunk.slice(from));
    return lines;
  }
}
