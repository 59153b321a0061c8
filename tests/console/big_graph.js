// A synthetic bank-sized entity graph drawn by the console's renderer, for
// test_the_graph_stays_readable_at_1500_entities: 1,500 entities in 30 communities around hub
// entities, some links inside a community and a few between hubs (the shape of a bank's
// co-occurrences). Evaluates to what the test checks.
(async () => {
  const { GraphView } = await import("/console/graph-canvas.js");
  const canvas = document.createElement("canvas");
  canvas.style = "position:fixed;inset:0;width:1280px;height:800px;background:#fff";
  document.body.append(canvas);
  const nodes = [];
  const edges = [];
  let seed = 7;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let i = 0; i < 1500; i++) {
    const group = ["person", "place", "org"][i % 3];
    nodes.push({ id: `e${i}`, label: `Entity ${i}`, weight: 1 + Math.floor(500 / (i + 1)), group });
    const hub = i % 30;
    if (i >= 30) {
      edges.push({ source: `e${i}`, target: `e${hub}`, weight: 1 + Math.floor(random() * 4) });
      if (random() < 0.3) {
        const peer = hub + 30 * (1 + Math.floor(random() * (i / 30 - 1)));
        edges.push({ source: `e${i}`, target: `e${peer}`, weight: 1 });
      }
    } else if (i > 0) {
      edges.push({ source: `e${i}`, target: `e${Math.floor(random() * i)}`, weight: 2 });
    }
  }
  const labels = [];
  const fill = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, x, y) {
    labels.push(text);
    return fill.call(this, text, x, y);
  };
  const view = new GraphView(canvas, nodes, edges, {});
  window.bigGraph = view;
  while (view.step < 300) await new Promise((resolve) => requestAnimationFrame(resolve));
  await new Promise((resolve) => requestAnimationFrame(resolve));
  labels.length = 0;
  view.draw();
  const placed = view.nodes.every((n) => Number.isFinite(n.x) && Number.isFinite(n.y));
  const onScreen = view.nodes.filter((n) => {
    const p = view.toScreen(n);
    return p.x >= 0 && p.x <= 1280 && p.y >= 0 && p.y <= 800;
  }).length;
  return { placed, onScreen, labels: labels.length, target: view.toScreen(view.nodes[0]) };
})();
