export default {
  mode: 'production',
  target: 'web',
  entry: './browser-default.mjs',
  output: { path: new URL('./out/webpack/', import.meta.url).pathname, filename: 'app.js' },
  performance: { hints: false },
};
