// The page's module: the shared browser app, one folder up.
import '../browser-default.mjs';
