/**
 * The sequencer's rule (sequencer.ts), apart from vitest and from the tools' modules so that a test
 * of it reaches no tool (go-tools.ts would count it as a file that needs every one).
 */
export interface ToolState {
  name: string;
  ready(): Promise<boolean>;
}

/** `sorted`, the items needing a tool that is not ready moved to the end, each part in its order. */
export async function waitingLast<T>(sorted: T[], needs: (item: T) => ToolState[]): Promise<T[]> {
  const ready = new Map<string, Promise<boolean>>();
  const waits = new Set<T>();
  for (const item of sorted) {
    for (const tool of needs(item)) {
      if (!ready.has(tool.name)) ready.set(tool.name, tool.ready());
      if (!(await ready.get(tool.name))) waits.add(item);
    }
  }
  return [...sorted.filter((item) => !waits.has(item)), ...sorted.filter((item) => waits.has(item))];
}
