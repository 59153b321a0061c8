// A force-directed graph drawn on one <canvas>: no DOM node per vertex, so thousands stay
// smooth. Repulsion between all nodes through a Barnes–Hut quadtree (O(n log n) a step: far
// groups of nodes act as one mass), springs along edges, a weak pull to the centre; the
// "temperature" alpha cools from 1 to 0.001 over STEPS steps. Drag to pan, wheel or + - to
// zoom, 0 to fit, click to select, Escape to clear.

const STEPS = 300;
const ALPHA_DECAY = 1 - Math.pow(0.001, 1 / STEPS);
// A cell this small for its distance counts as one mass: theta 0.9, and 1.2 above
// LARGE_GRAPH nodes, where the cruder repulsion is not visible and a step costs ~half as much.
const THETA2 = 0.81;
const THETA2_LARGE = 1.44;
const LARGE_GRAPH = 2000;
const CHARGE = -40; // repulsion per node
const LINK_DISTANCE = 30;
const GRAVITY = 0.04;
const VELOCITY_KEEP = 0.6;
const LEAF_SIZE = 8;
const MAX_LABELS = 140;
const FRAME_BUDGET_MS = 12;
const MAX_FRAME_BUDGET_MS = 100;
const EDGE_BANDS = 4;

function cell(x, y, size) {
  return { x, y, size, points: [], children: null, mass: 0, cx: 0, cy: 0 };
}

function childOf(c, n) {
  const half = c.size / 2;
  return c.children[(n.x >= c.x + half ? 1 : 0) + (n.y >= c.y + half ? 2 : 0)];
}

function insert(c, n, depth) {
  if (c.children) {
    insert(childOf(c, n), n, depth + 1);
    return;
  }
  c.points.push(n);
  if (c.points.length > LEAF_SIZE && depth < 20) {
    const half = c.size / 2;
    c.children = [0, 1, 2, 3].map((q) => cell(c.x + (q & 1) * half, c.y + (q >> 1) * half, half));
    const points = c.points;
    c.points = [];
    for (const p of points) insert(childOf(c, p), p, depth + 1);
  }
}

function aggregate(c) {
  let mass = 0;
  let cx = 0;
  let cy = 0;
  for (const child of c.children || []) {
    aggregate(child);
    mass += child.mass;
    cx += child.cx * child.mass;
    cy += child.cy * child.mass;
  }
  for (const p of c.points) {
    mass += 1;
    cx += p.x;
    cy += p.y;
  }
  c.mass = mass;
  c.cx = mass ? cx / mass : 0;
  c.cy = mass ? cy / mass : 0;
}

function quadtree(nodes) {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (const n of nodes) {
    minX = Math.min(minX, n.x);
    minY = Math.min(minY, n.y);
    maxX = Math.max(maxX, n.x);
    maxY = Math.max(maxY, n.y);
  }
  const root = cell(minX, minY, Math.max(maxX - minX, maxY - minY) + 1);
  for (const n of nodes) insert(root, n, 0);
  aggregate(root);
  return root;
}

/** Push `n` away from the nodes in `c`, treating far cells as single masses. */
function repel(c, n, k, theta2) {
  if (!c.mass) return;
  let dx = c.cx - n.x;
  let dy = c.cy - n.y;
  let d2 = dx * dx + dy * dy;
  if (c.children) {
    if (c.size * c.size < theta2 * d2) {
      n.vx += (dx * k * c.mass) / d2;
      n.vy += (dy * k * c.mass) / d2;
      return;
    }
    for (const child of c.children) repel(child, n, k, theta2);
    return;
  }
  for (const p of c.points) {
    if (p === n) continue;
    dx = p.x - n.x;
    dy = p.y - n.y;
    d2 = dx * dx + dy * dy;
    if (d2 < 1e-6) {
      // Coincident nodes: a fixed nudge derived from their indices (deterministic).
      dx = ((n.i * 7919) % 13) / 13 - 0.5;
      dy = ((p.i * 104729) % 17) / 17 - 0.5;
      d2 = dx * dx + dy * dy;
    }
    d2 = Math.max(d2, 1);
    n.vx += (dx * k) / d2;
    n.vy += (dy * k) / d2;
  }
}

/** A stable colour index for a node's group (its kind). */
function hueOf(group) {
  let hash = 0;
  for (const ch of group || "") hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return hash;
}

export class GraphView {
  /** nodes: [{id, label, weight, group}], edges: [{source, target, weight}] */
  constructor(canvas, nodes, edges, { onSelect } = {}) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.onSelect = onSelect || (() => {});
    this.index = new Map();
    this.nodes = nodes.map((n, i) => {
      const node = { ...n, x: 0, y: 0, vx: 0, vy: 0, degree: 0, i, hue: hueOf(n.group) };
      this.index.set(n.id, node);
      return node;
    });
    this.edges = edges
      .map((e) => ({ ...e, a: this.index.get(e.source), b: this.index.get(e.target) }))
      .filter((e) => e.a && e.b);
    for (const e of this.edges) {
      e.a.degree++;
      e.b.degree++;
    }
    for (const e of this.edges) {
      e.strength = 1 / Math.max(1, Math.min(e.a.degree, e.b.degree));
      e.bias = e.a.degree / (e.a.degree + e.b.degree);
    }
    this.neighbours = new Map(this.nodes.map((n) => [n, new Set()]));
    for (const e of this.edges) {
      this.neighbours.get(e.a).add(e.b);
      this.neighbours.get(e.b).add(e.a);
    }
    this.maxWeight = Math.max(1, ...this.nodes.map((n) => n.weight || 1));
    this.byWeight = [...this.nodes].sort((p, q) => (q.weight || 0) - (p.weight || 0) || q.degree - p.degree);
    this.maxEdge = Math.max(1, ...this.edges.map((e) => e.weight || 1));
    this.seed();
    this.scale = 1;
    this.offset = { x: 0, y: 0 };
    this.selected = null;
    this.hovered = null;
    this.step = 0;
    this.alpha = 1;
    this.frame = 0;
    this.listeners = [];
    this.bind();
    this.resize();
    this.fit();
    this.tick();
  }

  /** Hubs in the middle, the rest on a sunflower spiral around them: a start close to the end. */
  seed() {
    const order = [...this.nodes].sort((p, q) => q.degree - p.degree || (q.weight || 0) - (p.weight || 0));
    const golden = Math.PI * (3 - Math.sqrt(5));
    order.forEach((node, k) => {
      const r = 10 * Math.sqrt(k + 0.5);
      node.x = r * Math.cos(k * golden);
      node.y = r * Math.sin(k * golden);
    });
  }

  radius(node) {
    return 3 + 9 * Math.sqrt((node.weight || 1) / this.maxWeight);
  }

  simulate() {
    const alpha = this.alpha;
    const root = quadtree(this.nodes);
    const theta2 = this.nodes.length > LARGE_GRAPH ? THETA2_LARGE : THETA2;
    for (const n of this.nodes) repel(root, n, CHARGE * alpha, theta2);
    // Springs: the end with fewer links moves more, so hubs stay put and leaves gather
    // around them.
    for (const e of this.edges) {
      let dx = e.b.x + e.b.vx - e.a.x - e.a.vx;
      let dy = e.b.y + e.b.vy - e.a.y - e.a.vy;
      const d = Math.sqrt(dx * dx + dy * dy) || 1;
      const f = ((d - LINK_DISTANCE) / d) * alpha * e.strength;
      dx *= f;
      dy *= f;
      e.b.vx -= dx * e.bias;
      e.b.vy -= dy * e.bias;
      e.a.vx += dx * (1 - e.bias);
      e.a.vy += dy * (1 - e.bias);
    }
    for (const n of this.nodes) {
      n.vx -= n.x * GRAVITY * alpha;
      n.vy -= n.y * GRAVITY * alpha;
      if (n === this.dragging) {
        n.vx = 0;
        n.vy = 0;
        continue;
      }
      n.vx *= VELOCITY_KEEP;
      n.vy *= VELOCITY_KEEP;
      n.x += n.vx;
      n.y += n.vy;
    }
    this.alpha += (0 - this.alpha) * ALPHA_DECAY;
    this.step++;
  }

  tick() {
    // As many steps as fit in the frame's budget, then draw: small graphs settle within a few
    // frames, large ones keep the page responsive while they do. When frames come slowly (a
    // busy machine, a background tab) each may take half the gap since the last one, so the
    // layout's wall time follows the work, not the frame rate (bench/console_graph.py).
    const started = performance.now();
    const gap = this.lastTick ? started - this.lastTick : 0;
    const budget = Math.min(MAX_FRAME_BUDGET_MS, Math.max(FRAME_BUDGET_MS, gap / 2));
    this.lastTick = started;
    do this.simulate();
    while (this.step < STEPS && performance.now() - started < budget);
    if (this.step < 60 && !this.touched) this.fit();
    this.draw();
    if (this.step < STEPS) this.frame = requestAnimationFrame(() => this.tick());
    else if (!this.touched) {
      this.fit();
      this.draw();
    }
  }

  colors() {
    const style = getComputedStyle(this.canvas);
    return {
      edge: style.getPropertyValue("--graph-edge").trim() || "#8886",
      text: style.getPropertyValue("--text").trim() || "#222",
      halo: style.getPropertyValue("--bg").trim() || "#fff",
      accent: style.getPropertyValue("--accent").trim() || "#36c",
      groups: ["--g1", "--g2", "--g3", "--g4", "--g5", "--g6"].map((v) => style.getPropertyValue(v).trim() || "#888"),
    };
  }

  groupColor(colors, node) {
    return colors.groups[node.hue % colors.groups.length];
  }

  /** The part of the layout on screen, in layout coordinates. */
  visibleBox() {
    return {
      x0: -this.offset.x / this.scale,
      y0: -this.offset.y / this.scale,
      x1: (this.width - this.offset.x) / this.scale,
      y1: (this.height - this.offset.y) / this.scale,
    };
  }

  toScreen(node) {
    return { x: node.x * this.scale + this.offset.x, y: node.y * this.scale + this.offset.y };
  }

  draw() {
    const { ctx, canvas } = this;
    const dpr = window.devicePixelRatio || 1;
    const colors = this.colors();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.save();
    ctx.translate(this.offset.x, this.offset.y);
    ctx.scale(this.scale, this.scale);
    const focus = this.selected || this.hovered;
    const near = focus ? this.neighbours.get(focus) : null;
    // Fainter edges the more there are, so 5,000 links read as structure, not a grey mass.
    const base = Math.max(0.06, Math.min(0.5, 6 / Math.sqrt(this.edges.length || 1)));
    ctx.lineCap = "round";
    ctx.strokeStyle = colors.edge;
    // Edges in EDGE_BANDS weight bands, one path and one stroke per band: at 5,000 entities a
    // stroke per edge made drawing the slowest part of a frame (bench/console_graph.py).
    const bands = Array.from({ length: EDGE_BANDS }, () => []);
    for (const e of this.edges) {
      if (focus && (e.a === focus || e.b === focus)) continue;
      const w = (e.weight || 1) / this.maxEdge;
      bands[Math.min(EDGE_BANDS - 1, Math.floor(w * EDGE_BANDS))].push(e);
    }
    bands.forEach((band, k) => {
      if (!band.length) return;
      const w = (k + 0.5) / EDGE_BANDS;
      ctx.globalAlpha = focus ? base * 0.4 : base * (0.6 + 0.8 * w);
      ctx.lineWidth = (0.6 + 1.6 * w) / this.scale;
      ctx.beginPath();
      for (const e of band) {
        ctx.moveTo(e.a.x, e.a.y);
        ctx.lineTo(e.b.x, e.b.y);
      }
      ctx.stroke();
    });
    if (focus) {
      ctx.strokeStyle = colors.accent;
      ctx.globalAlpha = 0.9;
      ctx.lineWidth = 1.8 / this.scale;
      ctx.beginPath();
      for (const e of this.edges) {
        if (e.a !== focus && e.b !== focus) continue;
        ctx.moveTo(e.a.x, e.a.y);
        ctx.lineTo(e.b.x, e.b.y);
      }
      ctx.stroke();
    }
    // Nodes: one path per colour and dimness, only those inside the view.
    const shrink = Math.sqrt(this.scale);
    const view = this.visibleBox();
    const groups = new Map();
    for (const n of this.nodes) {
      const r = this.radius(n) / shrink;
      if (n.x + r < view.x0 || n.x - r > view.x1 || n.y + r < view.y0 || n.y - r > view.y1) continue;
      const dim = Boolean(focus && n !== focus && !near.has(n));
      const key = `${dim ? 1 : 0}${this.groupColor(colors, n)}`;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(n);
    }
    for (const [key, members] of groups) {
      ctx.globalAlpha = key[0] === "1" ? 0.25 : 1;
      ctx.fillStyle = key.slice(1);
      ctx.beginPath();
      for (const n of members) {
        const r = this.radius(n) / shrink;
        ctx.moveTo(n.x + r, n.y);
        ctx.arc(n.x, n.y, r, 0, Math.PI * 2);
      }
      ctx.fill();
    }
    if (this.selected) {
      const n = this.selected;
      ctx.globalAlpha = 1;
      ctx.strokeStyle = colors.accent;
      ctx.lineWidth = 3 / this.scale;
      ctx.beginPath();
      ctx.arc(n.x, n.y, this.radius(n) / shrink, 0, Math.PI * 2);
      ctx.stroke();
    }
    ctx.restore();
    this.drawLabels(colors, focus, near);
  }

  /** Labels in screen space (crisp at every zoom), greedily: the focus, its neighbours, then
   * the most-mentioned entities, skipping any that would overlap one already drawn, up to
   * MAX_LABELS — so 1,000+ names never pile up, and zooming in reveals more. */
  drawLabels(colors, focus, near) {
    const { ctx } = this;
    ctx.globalAlpha = 1;
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.lineWidth = 3;
    ctx.strokeStyle = colors.halo;
    ctx.fillStyle = colors.text;
    const candidates = [];
    if (focus) candidates.push(focus, ...[...near].sort((p, q) => (q.weight || 0) - (p.weight || 0)));
    candidates.push(...this.byWeight);
    const taken = [];
    const seen = new Set();
    for (const n of candidates) {
      if (taken.length >= MAX_LABELS || seen.has(n)) continue;
      seen.add(n);
      const p = this.toScreen(n);
      if (p.x < -50 || p.y < -20 || p.x > this.width + 50 || p.y > this.height + 20) continue;
      const gap = this.radius(n) * Math.sqrt(this.scale) + 3;
      const w = ctx.measureText(n.label).width;
      const box = [p.x + gap, p.y - 8, p.x + gap + w, p.y + 8];
      if (n !== focus && taken.some((t) => box[0] < t[2] && box[2] > t[0] && box[1] < t[3] && box[3] > t[1])) continue;
      taken.push(box);
      ctx.strokeText(n.label, box[0], p.y);
      ctx.fillText(n.label, box[0], p.y);
    }
  }

  nodeAt(sx, sy) {
    const x = (sx - this.offset.x) / this.scale;
    const y = (sy - this.offset.y) / this.scale;
    let best = null;
    let bestD = Infinity;
    for (const n of this.nodes) {
      const r = this.radius(n) / Math.sqrt(this.scale) + 4 / this.scale;
      const d = (n.x - x) ** 2 + (n.y - y) ** 2;
      if (d < r * r && d < bestD) {
        best = n;
        bestD = d;
      }
    }
    return best;
  }

  fit() {
    if (!this.nodes.length) return;
    const xs = this.nodes.map((n) => n.x);
    const ys = this.nodes.map((n) => n.y);
    const [minX, maxX, minY, maxY] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const w = this.width || 1;
    const hgt = this.height || 1;
    this.scale = Math.min(4, 0.9 * Math.min(w / Math.max(40, maxX - minX), hgt / Math.max(40, maxY - minY)));
    this.offset = { x: w / 2 - ((minX + maxX) / 2) * this.scale, y: hgt / 2 - ((minY + maxY) / 2) * this.scale };
  }

  zoom(factor, sx = this.width / 2, sy = this.height / 2) {
    this.touched = true;
    const next = Math.max(0.05, Math.min(20, this.scale * factor));
    this.offset.x = sx - ((sx - this.offset.x) * next) / this.scale;
    this.offset.y = sy - ((sy - this.offset.y) * next) / this.scale;
    this.scale = next;
    this.draw();
  }

  /** Select a node and centre the view on it. */
  focusOn(id) {
    const node = this.index.get(id);
    if (!node) return;
    this.selected = node;
    this.touched = true;
    this.offset = { x: this.width / 2 - node.x * this.scale, y: this.height / 2 - node.y * this.scale };
    if (this.scale < 1.5) this.zoom(1.5 / this.scale);
    this.draw();
    this.onSelect(node);
  }

  resize() {
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    this.width = rect.width;
    this.height = rect.height;
    this.canvas.width = Math.round(rect.width * dpr);
    this.canvas.height = Math.round(rect.height * dpr);
    this.draw();
  }

  on(target, type, fn, options) {
    target.addEventListener(type, fn, options);
    this.listeners.push(() => target.removeEventListener(type, fn, options));
  }

  bind() {
    const c = this.canvas;
    let down = null;
    const pos = (e) => {
      const r = c.getBoundingClientRect();
      return { x: e.clientX - r.left, y: e.clientY - r.top };
    };
    this.on(c, "wheel", (e) => {
      e.preventDefault();
      const p = pos(e);
      this.zoom(Math.exp(-e.deltaY * 0.0015), p.x, p.y);
    }, { passive: false });
    this.on(c, "pointerdown", (e) => {
      const p = pos(e);
      down = { ...p, ox: this.offset.x, oy: this.offset.y, moved: false, node: this.nodeAt(p.x, p.y) };
      c.setPointerCapture(e.pointerId);
    });
    this.on(c, "pointermove", (e) => {
      const p = pos(e);
      if (down) {
        if (Math.abs(p.x - down.x) + Math.abs(p.y - down.y) > 3) down.moved = true;
        if (down.moved && down.node) {
          this.dragging = down.node;
          down.node.x = (p.x - this.offset.x) / this.scale;
          down.node.y = (p.y - this.offset.y) / this.scale;
        } else if (down.moved) {
          this.touched = true;
          this.offset.x = down.ox + p.x - down.x;
          this.offset.y = down.oy + p.y - down.y;
        }
        this.draw();
        return;
      }
      const hit = this.nodeAt(p.x, p.y);
      if (hit !== this.hovered) {
        this.hovered = hit;
        c.style.cursor = hit ? "pointer" : "grab";
        c.title = hit ? `${hit.label} (${hit.weight} mentions, ${hit.degree} links)` : "";
        this.draw();
      }
    });
    this.on(c, "pointerup", (e) => {
      if (down && !down.moved) {
        const p = pos(e);
        this.selected = this.nodeAt(p.x, p.y);
        this.draw();
        this.onSelect(this.selected);
      }
      this.dragging = null;
      down = null;
    });
    this.on(c, "keydown", (e) => {
      if (e.key === "+" || e.key === "=") this.zoom(1.25);
      else if (e.key === "-") this.zoom(0.8);
      else if (e.key === "0") {
        this.fit();
        this.draw();
      } else if (e.key === "Escape") {
        this.selected = null;
        this.draw();
        this.onSelect(null);
      } else return;
      e.preventDefault();
    });
    const observer = new ResizeObserver(() => this.resize());
    observer.observe(c);
    this.listeners.push(() => observer.disconnect());
    this.on(window, "engram:theme", () => this.draw());
  }

  destroy() {
    cancelAnimationFrame(this.frame);
    for (const off of this.listeners) off();
  }
}
