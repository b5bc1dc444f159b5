import { print, printJson, type Context } from '../context.ts';
import { table } from '../render.ts';

/** `lenstack catalog`: every lens and stack. */
export async function catalogCommand(ctx: Context): Promise<number> {
  const catalog = await ctx.catalog();
  if (ctx.json) printJson(ctx, catalog);
  else {
    const lenses = catalog.modules.map((m): [string, string] => [m.name, `${m.billable ? '1 credit' : 'free'}${m.internal ? ', internal' : ''}  ${m.description}`]);
    const stacks = catalog.presets.map((p): [string, string] => [p.name, p.modules.join(', ')]);
    print(ctx, `Lenses\n${table(lenses, '  ', ctx.width)}\n\nStacks\n${table(stacks, '  ', ctx.width)}`);
  }
  return 0;
}

/** `lenstack usage`: the account's credits. */
export async function usageCommand(ctx: Context): Promise<number> {
  const usage = await ctx.client.usage();
  if (ctx.json) printJson(ctx, usage);
  else
    print(ctx, table([
      ['available', String(usage.community.balance + usage.purchased.balance)],
      ['community', String(usage.community.balance)],
      ['purchased', String(usage.purchased.balance)],
      ['held for running work', String(usage.reserved)],
    ], '', ctx.width));
  return 0;
}
