import type { Catalog, Lenstack } from '@lenstack/client';

/** What every command gets from main: the client, the output mode and where to write. */
export interface Context {
  client: Lenstack;
  /** The key and API the client was made with (the batch command's uploads speak tus beside it). */
  apiKey: string;
  baseUrl: string;
  json: boolean;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  /** Terminal width for tables (unbounded when stdout is not a terminal). */
  width: number;
  catalog(): Promise<Catalog>;
  /** What a failure report names besides the error (the batch a failure came after). */
  errorContext: Record<string, string>;
}

export function print(ctx: Context, text: string): void {
  ctx.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

export function printJson(ctx: Context, value: unknown): void {
  ctx.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** `--lens a,b --lens c` → [a, b, c]. */
export function listOption(values: string[] | undefined): string[] {
  return (values ?? []).flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
}
