// Imported first by the entries that load the wasm their own way (init.mjs,
// node.mjs, workerd.mjs): tells lease-fence.mjs not to fetch it at import.
// ES modules run their imports in order, so this runs before lease-fence.mjs.
import { loading } from './loader.mjs';

loading.auto = false;
