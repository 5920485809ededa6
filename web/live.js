// Live mode (placeholder until it is built).
export function init() {}
export function rerun() {}
