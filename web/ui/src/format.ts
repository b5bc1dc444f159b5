/** Numbers and dates as the console shows them. */
export const fmt = new Intl.NumberFormat('en');
export const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });
/** A day as YYYY-MM-DD (UTC). */
export const day = (iso: string) => new Date(iso).toISOString().slice(0, 10);
