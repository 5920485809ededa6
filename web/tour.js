// The tour's only script: fits each embedded playground's frame to the
// height the playground reports (the snippet docs/playground.md documents).
// A message is trusted only from one of this page's own frames, and only
// its height is used.

addEventListener('message', (e) => {
  if (e.data?.type !== 'lease-fence:height' || !Number.isFinite(e.data.height)) return;
  for (const frame of document.querySelectorAll('iframe')) {
    if (frame.contentWindow === e.source) frame.style.height = `${Math.min(Math.max(e.data.height, 100), 5000)}px`;
  }
});

// Module scripts run once the document is parsed: the page is ready.
document.body.classList.add('ready');
