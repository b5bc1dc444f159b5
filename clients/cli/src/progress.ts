/**
 * A one-line progress bar on stderr, drawn only when stderr is a terminal: piped or captured
 * output (scripts, CI logs) gets none of it.
 */
export class Progress {
  #last = '';
  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly label: string,
  ) {}

  get enabled(): boolean {
    return this.stream.isTTY === true;
  }

  update(done: number, total: number, note = ''): void {
    if (!this.enabled) return;
    const line = progressLine(this.label, done, total, note, this.stream.columns ?? 80);
    if (line === this.#last) return;
    this.#last = line;
    this.stream.write(`\r\x1b[2K${line}`);
  }

  finish(): void {
    if (!this.enabled || this.#last === '') return;
    this.stream.write('\r\x1b[2K');
    this.#last = '';
  }
}

export function progressLine(label: string, done: number, total: number, note: string, columns: number): string {
  const width = Math.max(10, Math.min(40, columns - label.length - note.length - 20));
  const filled = total === 0 ? width : Math.round((done / total) * width);
  return `${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total}${note ? `  ${note}` : ''}`;
}
