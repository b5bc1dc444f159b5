/**
 * Where a long setup is: each step named as it starts and timed as it ends, so a setup that runs
 * out of time says which step it was waiting for (a hook timeout alone names none). `within`
 * fails first, a little before the hook's own timeout, with the step under way and the steps done.
 */
export class Steps {
  private current = 'starting';
  private readonly done: string[] = [];
  private readonly started = Date.now();

  async step<T>(name: string, run: () => Promise<T>): Promise<T> {
    this.current = name;
    const t0 = Date.now();
    const value = await run();
    this.done.push(`${name} ${Date.now() - t0} ms`);
    this.current = 'between steps';
    return value;
  }

  /** The setup, failed after `ms` with an error naming the step under way. */
  async within<T>(ms: number, run: (steps: Steps) => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(this.report(`still at "${this.current}" after ${ms} ms`))), ms);
    });
    try {
      return await Promise.race([run(this), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  report(what: string): string {
    return `${what} (${Date.now() - this.started} ms since the start); done: ${this.done.join(', ') || 'nothing'}`;
  }
}
