"""Renderers of a :class:`~perfmagic.profile.flameresult.FlameResult`: a self-contained interactive
HTML flame graph and a static PNG icicle (used by :mod:`perfmagic.render.flame`, which gives the caption:
the graph knows nothing of the text renderer).

The HTML is one ``<div>`` with the text summary, the static PNG (for views that strip JavaScript:
GitHub, sanitised HTML) and a small vanilla-JS renderer with the data inline as JSON — no library,
no CDN, no URL of any kind, so it works offline in JupyterLab, Notebook 7, VS Code, nbconvert HTML
and Binder. When the script runs it hides the PNG and draws the graph as positioned ``<div>``s:
click a frame to zoom into it (click the root or "reset" to zoom out), hover for file:line,
self and total time and the busiest lines, type in the search box to highlight matching frames and
read the share of time they cover. Every element id carries a per-output random suffix, so several
flame graphs in one notebook do not interfere.
"""

from __future__ import annotations

import base64
import html
import json
import uuid
from .figures import new_figure, png_bytes
from typing import Any

PRUNE_FRACTION = 0.0005   # nodes under 0.05% of the run are dropped from the HTML data (not from the result)
MAX_PNG_ROWS = 40


def _pack(tree: dict[str, Any], strings: dict[str, int], floor: float) -> list[Any]:
    def sid(s: str) -> int:
        return strings.setdefault(s, len(strings))

    lines = sorted(tree["lines"].items(), key=lambda kv: -kv[1])[:5]
    kids = [_pack(c, strings, floor) for c in tree["children"] if c["total"] >= floor]
    return [sid(tree["name"]), sid(tree["where"]), round(tree["total"], 6), round(tree["self"], 6),
            [[ln, round(s, 6)] for ln, s in lines], kids]


def flame_data(r: Any, sampler: str = "") -> dict[str, Any]:
    """The graph's data: the pruned tree with its strings interned, and the caption (``sampler``)."""
    tree = r.tree()
    strings: dict[str, int] = {}
    root = _pack(tree, strings, tree["total"] * PRUNE_FRACTION)
    return {"strings": list(strings), "root": root, "sampler": sampler}


def _json_for_script(obj: Any) -> str:
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=True)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_CSS = """
#{u} {{font-family:monospace;font-size:12px}}
#{u} .pmf-bar {{margin:4px 0;display:flex;gap:8px;align-items:center}}
#{u} .pmf-bar input {{font-family:monospace;font-size:12px;width:16em}}
#{u} .pmf-bar button {{font-size:11px}}
#{u} .pmf-graph {{position:relative;width:100%;overflow:hidden;border:1px solid #ddd;background:#fff}}
#{u} .pmf-n {{position:absolute;height:17px;line-height:17px;box-sizing:border-box;border-right:1px solid #fff;
  border-bottom:1px solid #fff;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;padding:0 3px;color:#222;
  cursor:pointer;font-size:11px}}
#{u} .pmf-n:hover {{filter:brightness(0.9)}}
#{u} .pmf-n.pmf-dim {{opacity:0.55}}
#{u} .pmf-n.pmf-hit {{background:#e05cf0 !important}}
#{u} .pmf-tip {{position:absolute;display:none;z-index:10;background:#fffbe6;border:1px solid #aaa;padding:4px 6px;
  white-space:pre;pointer-events:none;font-size:11px;color:#000;box-shadow:1px 1px 3px rgba(0,0,0,.2)}}
"""

_JS = r"""
(function(){
var U=%(uid)s, D=%(data)s;
var box=document.getElementById(U); if(!box||box.dataset.pmfReady)return; box.dataset.pmfReady="1";
var S=D.strings, root=D.root, g=box.querySelector(".pmf-graph"), tip=box.querySelector(".pmf-tip");
var st=box.querySelector(".pmf-static"); if(st)st.style.display="none";
box.querySelector(".pmf-live").style.display="block";
var q=box.querySelector("input"), info=box.querySelector(".pmf-info"), RH=18;
function par(n,p){n.p=p;for(var i=0;i<n[5].length;i++)par(n[5][i],n);} par(root,null);
function depth(n){var d=0;for(var i=0;i<n[5].length;i++)d=Math.max(d,depth(n[5][i]));return d+1;}
function fmt(s){if(s>=1)return s.toPrecision(3)+" s";if(s>=1e-3)return (s*1e3).toPrecision(3)+" ms";return (s*1e6).toPrecision(3)+" \u00b5s";}
function pct(x){return (100*x/root[2]).toFixed(1)+"%%";}
function color(n){var w=S[n[1]],nm=S[n[0]],h=0;for(var i=0;i<nm.length;i++)h=(h*31+nm.charCodeAt(i))&0xffff;
  if(!w)return "hsl(210,15%%,80%%)"; if(w.indexOf("In [")===0||w.indexOf("cell")===0)return "hsl("+(35+h%%20)+",90%%,"+(62+h%%12)+"%%)";
  if(/\.(c|so|h|cpp)(:|$)/.test(w))return "hsl(0,0%%,"+(70+h%%12)+"%%)"; return "hsl("+(h%%30)+",75%%,"+(62+h%%14)+"%%)";}
var zoom=root, term="";
function match(n){return term&&(S[n[0]].toLowerCase().indexOf(term)>=0||S[n[1]].toLowerCase().indexOf(term)>=0);}
function draw(){
  g.innerHTML=""; var W=g.clientWidth||800, anc=[], a=zoom; while(a){anc.unshift(a);a=a.p;}
  g.style.height=((anc.length-1+depth(zoom))*RH+2)+"px";
  function box1(n,x,w,d,dim){ if(w<1.5)return null; var e=document.createElement("div"); e.className="pmf-n"+(dim?" pmf-dim":"")+(match(n)?" pmf-hit":"");
    e.style.left=x+"px"; e.style.width=w+"px"; e.style.top=(d*RH)+"px"; e.style.background=color(n);
    e.textContent=w>30?S[n[0]]:""; e.onclick=function(){zoom=(n===zoom&&n.p)?n.p:n;draw();};
    e.onmousemove=function(ev){var r=box.getBoundingClientRect(),t=S[n[0]]+"\n"+(S[n[1]]||"")+
      "\ntotal "+fmt(n[2])+" ("+pct(n[2])+")   self "+fmt(n[3])+" ("+pct(n[3])+")";
      if(n[4].length)t+="\nlines: "+n[4].map(function(l){return l[0]+" ("+pct(l[1])+")";}).join(", ");
      tip.textContent=t; tip.style.display="block"; var lx=ev.clientX-r.left+12; if(lx>r.width-260)lx=Math.max(0,lx-280);
      tip.style.left=lx+"px"; tip.style.top=(ev.clientY-r.top+14)+"px";};
    e.onmouseleave=function(){tip.style.display="none";}; g.appendChild(e); return e;}
  for(var i=0;i<anc.length-1;i++)box1(anc[i],0,W,i,true);
  function rec(n,x,w,d){if(!box1(n,x,w,d,false))return;var cx=x;
    for(var i=0;i<n[5].length;i++){var c=n[5][i],cw=w*c[2]/n[2];rec(c,cx,cw,d+1);cx+=cw;}}
  function hits(n){if(match(n))return n[2];var s=0;for(var i=0;i<n[5].length;i++)s+=hits(n[5][i]);return s;}
  rec(zoom,0,W,anc.length-1); var hit=term?hits(zoom):0;
  var txt=(D.sampler?D.sampler+" \u00b7 ":"")+"root "+fmt(root[2]); if(zoom!==root)txt+=" \u00b7 zoomed on "+S[zoom[0]]+" ("+pct(zoom[2])+")";
  if(term)txt+=" \u00b7 \""+term+"\" matches "+pct(hit); info.textContent=txt;}
q.oninput=function(){term=q.value.trim().toLowerCase();draw();};
box.querySelector("button").onclick=function(){zoom=root;q.value="";term="";draw();};
draw(); if(window.ResizeObserver){var lw=g.clientWidth;new ResizeObserver(function(){if(g.clientWidth!==lw){lw=g.clientWidth;draw();}}).observe(g);}
})();
"""


def flame_html(r: Any, png: bytes | None = None, text: str | None = None, extra: str = "", *,
               sampler: str = "") -> str:
    """The text summary (``text``, default ``r.text()``), a static PNG fallback and the interactive graph,
    in one self-contained div; ``extra`` (self-contained HTML, e.g. folded sections) goes under the graph;
    ``sampler`` (which sampler ran: :func:`perfmagic.render.flame.sampler_line`) captions it."""
    uid = "pmflame-" + uuid.uuid4().hex[:12]
    text = html.escape(r.text() if text is None else text)
    static = ""
    if png is not None:
        b64 = base64.b64encode(png).decode("ascii")
        static = (f"<div class='pmf-static'><img src='data:image/png;base64,{b64}' "
                  f"alt='flame graph of the cell (static)'></div>")
    live = ""
    if r.stacks:
        js = _JS % {"uid": json.dumps(uid), "data": _json_for_script(flame_data(r, sampler))}
        live = ("<div class='pmf-live' style='display:none'>"
                "<div class='pmf-bar'><input type='search' placeholder='search functions / files'>"
                "<button type='button'>reset zoom</button><span class='pmf-info'></span></div>"
                "<div class='pmf-graph'></div><div class='pmf-tip'></div></div>"
                f"<script>{js}</script>")
    return (f"<div id='{uid}' class='perfmagic-result perfmagic-flame' style='position:relative'>"
            f"<style>{_CSS.format(u=uid)}</style>"
            f"<pre style='margin:0;font-size:12px'>{text}</pre>{static}{live}{extra}</div>")


def flame_png(r: Any, *, sampler: str = "") -> bytes | None:
    """A static icicle (root on top) of the flame graph, or None without matplotlib or samples; ``sampler``
    (which sampler ran) goes in its title."""
    if not r.stacks:
        return None
    try:
        from matplotlib.patches import Rectangle
    except ImportError:
        return None
    tree = r.tree()
    total = tree["total"] or 1.0
    boxes: list[tuple[float, float, int, dict[str, Any]]] = []

    def walk(n: dict[str, Any], x: float, d: int) -> None:
        if d >= MAX_PNG_ROWS or n["total"] / total < 0.002:
            return
        boxes.append((x, n["total"] / total, d, n))
        cx = x
        for c in n["children"]:
            walk(c, cx, d + 1)
            cx += c["total"] / total

    walk(tree, 0.0, 0)
    depth = max(d for _, _, d, _ in boxes) + 1
    fig = new_figure(9.0, 0.6 + 0.24 * depth)
    ax = fig.subplots()
    import zlib

    for x, w, d, n in boxes:
        h = zlib.crc32(n["name"].encode()) % 1000 / 1000
        where = n["where"] or ""
        if not where:
            col = (0.78, 0.8, 0.83)
        elif where.startswith(("In [", "cell")):
            col = (0.98, 0.72 + 0.12 * h, 0.35)
        else:
            col = (0.93, 0.45 + 0.3 * h, 0.35 + 0.1 * h)
        ax.add_patch(Rectangle((x, -d - 1), w, 0.95, facecolor=col, edgecolor="white", lw=0.5))
        chars = int(w * 9.0 * 100 / 6.2)
        if chars >= 4:
            lab = n["name"] if len(n["name"]) <= chars else n["name"][: max(1, chars - 1)] + "…"
            ax.text(x + 0.003, -d - 0.53, lab, fontsize=7, va="center", ha="left", clip_on=True)
    ax.set_xlim(0, 1)
    ax.set_ylim(-depth - 0.05, 0)
    ax.set_yticks([])
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"], fontsize=7)
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    caption = f" ({sampler[:90]})" if sampler else ""
    ax.set_title(f"flame graph{caption} — width = share of {r.n_samples} samples",
                 fontsize=8, loc="left")
    return png_bytes(fig)
