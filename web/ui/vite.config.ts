import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The console's front end: built into web/ui/dist, served by web/app.ts (tools/scripts/build-web.ts).
export default defineConfig({
  root: import.meta.dirname,
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, target: 'es2022' },
  logLevel: 'warn',
});
