// A notebook view (docs/_ext/wbdocs_views.py) is a page of this site in an <iframe>: fit the frame's height to the
// view, which Bokeh draws after the frame has loaded (into the element that carries data-root-id) and lays out
// again when a tab opens or a plot resizes. A view that fills its window (stretch_both) keeps the CSS height.
function wbFitView(frame) {
  const doc = frame.contentDocument;
  if (!doc || !doc.body) return;
  const drawn = () => [...doc.querySelectorAll("[data-root-id] > *")];
  const fit = () => {
    const bottom = Math.max(0, ...drawn().map((e) => e.getBoundingClientRect().bottom));
    const scrollbar = frame.clientHeight - doc.documentElement.clientHeight;   // a wide view's horizontal bar
    const height = Math.ceil(bottom) + Math.max(0, scrollbar);
    if (bottom > 0 && Math.abs(frame.clientHeight - height) > 1) frame.style.height = `${height}px`;
  };
  const sizes = new ResizeObserver(fit);
  const watch = () => { drawn().forEach((e) => sizes.observe(e)); fit(); };
  new MutationObserver(watch).observe(doc.body, { childList: true, subtree: true });
  watch();
}
