// vite dev: the same page served from source, dependencies pre-bundled.
export default { root: 'vite', server: { host: '127.0.0.1', port: 0 }, clearScreen: false };
