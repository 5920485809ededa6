export default {
  root: 'vite',
  base: './',
  logLevel: 'warn',
  build: { outDir: '../out/vite', emptyOutDir: true, chunkSizeWarningLimit: 4096 },
};
