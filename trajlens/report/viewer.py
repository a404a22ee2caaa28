"""One trajectory as a web page: turn by turn, classes coloured, credit per call.

:func:`viewer_page` returns a self-contained HTML page for a trajectory and the other
trajectories of its group (or, for single-rollout runs, of its step), with previous/next
navigation among them and a filter by class. Each tool call shows its class (colour and
label), arguments, return code and observation (collapsed when long), and, when advantages are
given, its credit: the mean advantage over the call's model tokens as a colour, and each
token's advantage as a strip of colour (drawn on a canvas, only when the call scrolls into
view). Calls render in chunks as they approach the viewport, and a long observation is only
put into the page when opened, so a 60,000-token trajectory with 300 calls stays responsive.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from trajlens.report import html
from trajlens.report.plots import CLASS_COLOURS

MAX_SIBLINGS = 16
"""Trajectories of the same group or step carried in one page for navigation."""
MAX_TEXT = 20_000
"""Characters of an argument or observation kept in the page; the rest is cut, saying so."""
FORMAT_ERROR_COLOUR = "#c62828"


@dataclass(frozen=True)
class Credit:
    """Recomputed advantages of a run under one estimator label."""

    label: str
    advantages: pl.DataFrame
    """Rows of :func:`trajlens.run.advantages.recompute_run`: ``trajectory_id``,
    ``advantage`` and, for token-level estimators, ``token_advantages``."""


def run_credit(store: Any, run_id: str, label: str | None = None, *, steps: list[int] | None = None,
               choices: list | None = None, trained: Any = None) -> Credit | None:
    """Advantages under ``label``; by default under the estimator the run trained with, as every
    other surface names it (:func:`~trajlens.run.trained.run_trained_with`, or ``trained`` when the
    caller has it), else, when that is unknown or cannot be recomputed (on ``steps``: a trajectory
    without model tokens there), the first estimator the run's data allows that can; None when
    none can.

    With ``steps``, only those steps are recomputed: every estimator normalises within a
    step's batch (whitening, groups), so a step's advantages do not depend on other steps.
    """
    from trajlens.errors import ConfigError
    from trajlens.estimators import EstimatorInputError
    from trajlens.run.choices import ESTIMATOR_CHOICES, available_estimators, possible_facts, stored_lacks
    from trajlens.run.stepwise import recompute_steps

    if choices is None:
        choices = available_estimators(store, run_id)
    chosen = [c for c in choices if label is None or c.label == label]
    if label is not None and not chosen:
        known = next((c for c in ESTIMATOR_CHOICES if c.label == label), None)
        lacks = stored_lacks(store, run_id, known) if known is not None else []
        why = f" ({label} needs {' and '.join(lacks)})" if lacks else ""
        raise ConfigError([f"--estimator {label!r}: the report recomputes "
                           f"{', '.join(c.label for c in choices) or 'no estimator'} on run {run_id!r}{why}"])
    if label is None:
        from trajlens.run.trained import run_trained_with

        trained = trained if trained is not None else run_trained_with(store, run_id)
        own = trained.among(chosen)
        facts = possible_facts(store, run_id) if own is None and trained.choice is not None else None
        if facts is not None and not trained.choice.missing(facts):
            own = trained.choice  # identified from the logged advantages (trl_grpo_group), as attribution recomputes it
        # the run's own first; the others the data allows after it, for steps the own one cannot
        # be recomputed on (a trajectory without model tokens, which only reading the arrays shows)
        chosen = [own, *(c for c in chosen if c is not own)] if own is not None else chosen
    for choice in chosen:
        # a stateful estimator (gdpo_dynamic's moving averages) reads every step, the others only theirs
        read = None if steps is None or choice.spec().stateful else sorted(set(steps))
        try:
            parts = [frame if steps is None else frame.filter(pl.col("step").is_in(steps))
                     for frame in recompute_steps(store, run_id, choice.estimator, steps=read, **choice.options)]
        except EstimatorInputError:
            if label is not None:
                raise
            continue
        return Credit(choice.label, pl.concat(parts, how="diagonal_relaxed"))
    return None


def page_name(trajectory_id: str) -> str:
    """A safe, unique file name for a trajectory's page."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", trajectory_id)[-60:].strip("._") or "trajectory"
    return f"{slug}-{zlib.crc32(trajectory_id.encode()):08x}.html"


def viewer_page(store: Any, run_id: str, trajectory_id: str, credit: Credit | None = None, *,
                step: int | None = None, back: str | None = None) -> str:
    """The page of ``trajectory_id`` (and its group or step siblings); with its ``step``, only
    that step's partitions are read; ``back``: the address of the report it belongs to."""
    from trajlens.errors import ConfigError
    from trajlens.run.partitions import read_partitions

    store.require_runs([run_id])
    if step is None:
        trajectories = store.trajectories.filter(pl.col("run_id") == run_id)
    else:
        trajectories = read_partitions(store, run_id, "trajectories", [step], None).lazy().filter(
            pl.col("run_id") == run_id)
    chosen = trajectories.filter(pl.col("trajectory_id") == trajectory_id).collect()
    if chosen.is_empty():
        raise ConfigError([f"--trajectory {trajectory_id!r}: not a trajectory of run {run_id!r}"])
    row = chosen.row(0, named=True)
    group = trajectories.filter((pl.col("step") == row["step"]) & (pl.col("group_id") == row["group_id"]))
    if group.select(pl.len()).collect().item() < 2:
        group, scope = trajectories.filter(pl.col("step") == row["step"]), f"step {row['step']}"
    else:
        scope = f"group {row['group_id']} of step {row['step']}"
    siblings = group.sort("trajectory_id").collect()
    position = siblings["trajectory_id"].to_list().index(trajectory_id)
    start = max(0, min(position - MAX_SIBLINGS // 2, siblings.height - MAX_SIBLINGS))
    siblings = siblings.slice(start, MAX_SIBLINGS)
    ids = siblings["trajectory_id"].to_list()
    calls = _calls(store, run_id, ids, row["step"] if step is not None else None)
    tokens = _token_credit(credit, ids)
    if credit is not None:
        calls = calls.with_columns(pl.Series("__credit", call_credit(store, run_id, row["step"], siblings, calls, credit)))
    blocks = []
    for index, sibling in enumerate(siblings.iter_rows(named=True)):
        data = _trajectory_data(sibling, calls.filter(pl.col("trajectory_id") == sibling["trajectory_id"]),
                                credit, tokens.get(sibling["trajectory_id"]))
        blocks.append(html.json_script(f"trajectory-{index}", data))
    meta = {"run": run_id, "scope": scope, "start": ids.index(trajectory_id), "count": len(ids),
            "estimator": credit.label if credit else None, "colours": {**CLASS_COLOURS, "format_error": FORMAT_ERROR_COLOUR}}
    body = (
        '<header id="head"></header><div id="filters"></div><div id="legend"></div><div id="calls"></div>'
        + "".join(blocks)
        + html.json_script("meta", meta)
    )
    nav = [(back, f"back to the report ({run_id})")] if back else []
    return html.page(f"{run_id}: {trajectory_id}", body, script=_SCRIPT, style=_STYLE, nav=nav)


def write_viewer(store: Any, run_id: str, trajectory_id: str, out: Path | str, credit: Credit | None = None, *,
                 step: int | None = None, back: str | None = None) -> Path:
    """Write the viewer page of a trajectory (of ``step``, when known) to ``out``, linking
    ``back`` to its report (default: the ``index.html`` of a report folder ``out`` sits in)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    back = report_link(out, run_id) if back is None else back
    out.write_text(viewer_page(store, run_id, trajectory_id, credit, step=step, back=back))
    return out


def report_link(page: Path, run_id: str) -> str | None:
    """The address, relative to ``page``, of its run's section in the report it sits in (an
    ``index.html`` up to three folders above it); None outside a report."""
    import os

    folder = page.resolve().parent
    index = next((p / "index.html" for p in [folder, *list(folder.parents)[:2]] if (p / "index.html").is_file()), None)
    return None if index is None else f"{os.path.relpath(index, folder)}#{run_id}"


SUGGESTED_IDS = 5
"""Close trajectory ids a failed lookup suggests."""


def resolve_trajectory(store: Any, run_id: str, wanted: str) -> tuple[str, int]:
    """The trajectory of ``run_id`` that ``wanted`` names, and its step: its id, else its task id,
    else a unique suffix of its id (after a ``/``, or any). When none or several match, a
    :class:`~trajlens.errors.ConfigError` names the closest ids."""
    import difflib

    from trajlens.errors import ConfigError

    rows = store.trajectories.filter(pl.col("run_id") == run_id).select("trajectory_id", "task_id", "step").collect()
    for matches in (rows.filter(pl.col("trajectory_id") == wanted),
                    rows.filter(pl.col("task_id") == wanted),
                    rows.filter(pl.col("trajectory_id").str.ends_with("/" + wanted)),
                    rows.filter(pl.col("trajectory_id").str.ends_with(wanted))):
        if matches.height == 1:
            return matches["trajectory_id"][0], int(matches["step"][0])
        if matches.height > 1:
            listed = ", ".join(matches["trajectory_id"].head(SUGGESTED_IDS).to_list())
            raise ConfigError([f"--trajectory {wanted!r}: {matches.height} trajectories of run {run_id!r} match "
                               f"({listed}{', ...' if matches.height > SUGGESTED_IDS else ''}); give the whole id"])
    ids = rows["trajectory_id"].to_list()
    close = difflib.get_close_matches(wanted, ids, n=SUGGESTED_IDS, cutoff=0.5) or [
        i for i in ids if wanted.split("/")[-1] in i][:SUGGESTED_IDS]
    hint = f"; close ids: {', '.join(close)}" if close else ""
    raise ConfigError([f"--trajectory {wanted!r}: not a trajectory or task of run {run_id!r}{hint}"])


def call_credit(store: Any, run_id: str, step: int, trajectories: pl.DataFrame, calls: pl.DataFrame,
                credit: Credit) -> list[float | None]:
    """Each call's credit under ``credit``, as attribution gives it (``call_credit``'s
    ``advantage``): the mean advantage over the model tokens credited to the call, its own and
    its turn's reasoning before it (:mod:`trajlens.attribution._spans`); the trajectory's
    advantage where a trajectory has no token arrays and the estimator is an outcome one; None
    where there is none, and for a call the harness rejected, which owns no tokens. ``calls`` are
    sorted by trajectory, in ``trajectories`` order, and call. Not rounded: the page rounds the
    value once, to what ``call_credit`` rounds to, where rounding it here first could move the
    last digit shown (0.8544921875 to 0.8545, shown as 0.855)."""
    import math

    from trajlens.attribution.calls import CREDITED_CALLS, step_call_credit
    from trajlens.run.partitions import read_partitions

    ids = trajectories["trajectory_id"].to_list()
    advantages = credit.advantages.filter(pl.col("trajectory_id").is_in(ids))
    tokens = None
    if "token_advantages" in advantages.columns:
        tokens = read_partitions(store, run_id, "tokens", [step], ["trajectory_id", "response_mask"])
        tokens = None if tokens is None else tokens.filter(pl.col("trajectory_id").is_in(ids))
    credited = calls.select(CREDITED_CALLS.alias("credited")).to_series().to_list()
    found = iter(step_call_credit(trajectories, calls.filter(CREDITED_CALLS), tokens, [advantages],
                                  ("token-mean",)).advantage[0])
    values = [next(found) if given else math.nan for given in credited]
    return [None if math.isnan(value) else float(value) for value in values]


def _calls(store: Any, run_id: str, ids: list[str], step: int | None = None) -> pl.DataFrame:
    """The calls of trajectories ``ids`` with their classes: those ``trajlens classify`` saved
    (:func:`saved_call_classes`, with its tool map), else classified here with the shipped maps
    (what classifying the run would save)."""
    from trajlens.classify import classify_calls
    from trajlens.classify.calls import ADDED_COLUMNS
    from trajlens.run.partitions import read_partitions

    wanted = (pl.col("run_id") == run_id) & pl.col("trajectory_id").is_in(ids)
    if step is not None:
        calls = read_partitions(store, run_id, "tool_calls", [step], None).filter(wanted)
    else:
        calls = store.tool_calls.filter(wanted).collect()
    saved = saved_call_classes(store, run_id, ids, step)
    if saved is None:
        return classify_calls(calls).sort("trajectory_id", "call_index")
    saved = saved.select("trajectory_id", pl.col("call_index").cast(calls.schema["call_index"]), *ADDED_COLUMNS)
    return calls.join(saved, on=["trajectory_id", "call_index"], how="left").sort("trajectory_id", "call_index")


def saved_call_classes(store: Any, run_id: str, ids: list[str], step: int | None = None) -> pl.DataFrame | None:
    """The ``call_classes`` rows ``trajlens classify`` (or the report) saved for the calls of
    trajectories ``ids`` of ``run_id`` (of ``step``, when known); None when none were saved (the
    run was never classified, or those trajectories have no calls)."""
    if "call_classes" not in store.tables():
        return None
    rows = store.table("call_classes").filter(pl.col("run_id") == run_id)
    if step is not None:
        rows = rows.filter(pl.col("step") == step)
    rows = rows.filter(pl.col("trajectory_id").is_in(ids)).collect()
    return rows if rows.height else None


def _token_credit(credit: Credit | None, ids: list[str]) -> dict[str, tuple[float | None, list[float] | None]]:
    if credit is None:
        return {}
    rows = credit.advantages.filter(pl.col("trajectory_id").is_in(ids))
    has_tokens = "token_advantages" in rows.columns
    return {r["trajectory_id"]: (r["advantage"], r["token_advantages"] if has_tokens else None)
            for r in rows.iter_rows(named=True)}


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n[... {len(text) - MAX_TEXT:,} more characters not shown]"


def _trajectory_data(row: dict, calls: pl.DataFrame, credit: Credit | None,
                     advantages: tuple[float | None, list[float] | None] | None) -> dict:
    _, token_values = advantages if advantages else (None, None)
    items = []
    for call in calls.iter_rows(named=True):
        klass = "format_error" if call["format_error"] else (call["primary_class"] or "other")
        item: dict[str, Any] = {"i": call["call_index"], "turn": call["turn"], "tool": call["tool_name"],
                                "class": klass, "args": _cut(call["command"] or call["arguments"]),
                                "obs": _cut(call["observation"]), "rc": call["return_code"],
                                "text": _cut(call.get("assistant_text"))}
        if credit is not None:
            span = None
            if token_values is not None and call["token_start"] is not None and call["token_end"] is not None:
                span = [round(float(v), 4) for v in token_values[call["token_start"]:call["token_end"]]]
            item["tokens"] = span
            item["credit"] = call["__credit"]
        items.append(item)
    return {"id": row["trajectory_id"], "step": row["step"], "group": row["group_id"], "task": row["task_id"],
            "reward": row["reward"], "resolved": row["resolved"], "exit": row["exit_status"],
            "turns": row["num_turns"], "tokens": row["model_tokens"], "calls": items,
            "response": _cut(row.get("response_text"))}


_STYLE = """
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:8px 0;z-index:3}
header button{font-size:13px;margin-right:6px}header .meta{color:#555;font-size:12.5px}
#filters label{margin-right:10px;font-size:12.5px;cursor:pointer}
#legend{font-size:12px;color:#555;margin:4px 0}
.chunk{min-height:40px}
.turn{border-left:3px solid #90a4ae;margin:10px 0;padding-left:10px}
.turn>.label,#calls>.label{font-size:11px;color:#78909c}
nav.top~main header{top:31px}
.said{white-space:pre-wrap;word-break:break-word;font-size:12.5px;background:#f3f6f9;border-left:3px solid #1565c0;
  padding:4px 8px;margin:4px 0;max-height:260px;overflow:auto}
.call{background:#fff;border:1px solid #e0e0e0;border-radius:4px;margin:4px 0;padding:5px 8px}
.call.hidden{display:none}
.call pre{margin:4px 0;white-space:pre-wrap;word-break:break-word;font-size:12px;max-height:320px;overflow:auto}
.call .credit{float:right;font-size:11.5px;border-radius:3px;padding:0 5px;border:1px solid #ccc}
.call canvas{display:block;width:100%;height:8px;margin-top:3px}
"""

_SCRIPT = r"""
(function(){
const meta=JSON.parse(document.getElementById('meta').textContent);
const CHUNK=25, LONG=600;
let current=null, index=meta.start, shown=new Set(Object.keys(meta.colours)), scale=1;
const observer=new IntersectionObserver(es=>{for(const e of es){if(e.isIntersecting){fill(e.target);observer.unobserve(e.target);}}},{rootMargin:'800px'});
function ink(hex){const n=parseInt(hex.slice(1),16),r=n>>16,g=(n>>8)&255,b=n&255;return (0.299*r+0.587*g+0.114*b)>150?'#1a1a1a':'#ffffff';}
function pill(k,text){return el('span',{class:'pill',style:'background:'+meta.colours[k]+';color:'+ink(meta.colours[k])},text);}
function el(tag,attrs,text){const n=document.createElement(tag);for(const k in attrs||{})n.setAttribute(k,attrs[k]);if(text!=null)n.textContent=text;return n;}
function colour(v){if(v==null)return '#ffffff';const t=Math.max(-1,Math.min(1,v/scale));
  const r=t<0?255:Math.round(255-t*200), g=Math.round(255-Math.abs(t)*190), b=t>0?255:Math.round(255+t*200);
  return 'rgb('+r+','+g+','+b+')';}
function load(i){return JSON.parse(document.getElementById('trajectory-'+i).textContent);}
function show(i){
  index=(i+meta.count)%meta.count; current=load(index);
  const vals=[];for(const c of current.calls)if(c.tokens)for(const v of c.tokens)vals.push(Math.abs(v));else if(c.credit!=null)vals.push(Math.abs(c.credit));
  vals.sort((a,b)=>a-b); scale=vals.length?(vals[Math.floor(0.99*(vals.length-1))]||1):1;
  header(); filters(); legend(); calls();
  if(location.hash.slice(1)!==encodeURIComponent(current.id))history.replaceState(null,'','#'+encodeURIComponent(current.id));
}
function header(){
  const h=document.getElementById('head');h.textContent='';
  const prev=el('button',{id:'prev',title:'previous trajectory of the '+meta.scope.split(' ')[0]},'\u2190 previous');
  const next=el('button',{id:'next',title:'next trajectory'},'next \u2192');
  prev.onclick=()=>show(index-1); next.onclick=()=>show(index+1);
  h.append(prev,next,el('strong',{id:'trajectory-id'},current.id));
  const facts=[meta.run, meta.scope, (index+1)+' of '+meta.count, 'task '+current.task,
    'reward '+(current.reward==null?'none':current.reward), 'resolved '+(current.resolved==null?'unknown':current.resolved),
    'exit '+(current.exit||'unknown'), current.turns+' turns', (current.tokens==null?'?':current.tokens)+' model tokens',
    callCount()];
  h.append(el('div',{class:'meta'},facts.join(' \u00b7 ')));
}
function callCount(){
  // the calls the shares count (n_calls); those the harness rejected are counted apart
  const rejected=current.calls.filter(c=>c.class==='format_error').length;
  const counted=(current.calls.length-rejected)+' calls';
  return rejected?counted+' (+'+rejected+' rejected)':counted;
}
function filters(){
  const f=document.getElementById('filters');f.textContent='';
  const counts={};for(const c of current.calls)counts[c.class]=(counts[c.class]||0)+1;
  for(const k of Object.keys(meta.colours)){if(!counts[k])continue;
    const box=el('input',{type:'checkbox','data-class':k});box.checked=shown.has(k);
    box.onchange=()=>{box.checked?shown.add(k):shown.delete(k);apply();};
    const label=el('label');label.append(box,pill(k,k+' '+counts[k]));f.append(label);}
}
function legend(){
  const l=document.getElementById('legend');
  l.textContent=meta.estimator?('credit under '+meta.estimator+': red negative, blue positive, full colour at |advantage| '+scale.toFixed(3)+' (99th percentile)'):'no advantages for this run: no credit shown';
}
function calls(){
  const box=document.getElementById('calls');box.textContent='';observer.disconnect();
  for(let s=0;s<current.calls.length;s+=CHUNK){const chunk=el('div',{class:'chunk','data-start':s});
    chunk.style.minHeight=(Math.min(CHUNK,current.calls.length-s)*60)+'px';box.append(chunk);observer.observe(chunk);}
  if(!current.calls.length)box.append(el('p',{},'No tool calls in this trajectory.'));
  if(current.response){box.append(el('div',{class:'label'},'the model\u2019s final text'),el('div',{class:'said'},current.response));}
}
function fill(chunk){
  const s=+chunk.dataset.start;let turnBox=null,turn=null;
  for(const c of current.calls.slice(s,s+CHUNK)){
    if(c.turn!==turn){turn=c.turn;turnBox=el('div',{class:'turn'});turnBox.append(el('div',{class:'label'},'turn '+turn));chunk.append(turnBox);}
    if(c.text)turnBox.append(el('div',{class:'said',title:'the model\u2019s own text of this turn'},c.text));
    turnBox.append(card(c));}
  chunk.style.minHeight='';apply();
}
function card(c){
  const d=el('div',{class:'call','data-class':c.class});
  d.append(pill(c.class,c.class),document.createTextNode(' '+c.tool+' #'+c.i+(c.rc!=null?'  (exit '+c.rc+')':'')));
  if(c.credit!==undefined){const b=el('span',{class:'credit',title:'mean advantage over the model tokens credited to the call: its own and its turn\u2019s reasoning before it'},c.credit==null?'no credit':'credit '+c.credit.toFixed(3));b.style.background=colour(c.credit);d.append(b);}
  if(c.args)d.append(el('pre',{class:'args'},c.args));
  if(c.tokens&&c.tokens.length){const cv=el('canvas',{width:Math.min(c.tokens.length,1200),height:8,title:c.tokens.length+' tokens'});d.append(cv);paint(cv,c.tokens);}
  if(c.obs!=null){const det=el('details',{class:'obs'});const long=c.obs.length>LONG||c.obs.split('\n').length>12;
    det.append(el('summary',{},'observation ('+c.obs.length.toLocaleString()+' characters)'));
    if(long){det.ontoggle=()=>{if(det.open&&!det.dataset.filled){det.append(el('pre',{},c.obs));det.dataset.filled=1;}};}
    else{det.open=true;det.append(el('pre',{},c.obs));}
    d.append(det);}
  return d;
}
function paint(cv,tokens){const ctx=cv.getContext('2d'),w=cv.width,n=tokens.length;
  for(let x=0;x<w;x++){const a=Math.floor(x*n/w),b=Math.max(a+1,Math.floor((x+1)*n/w));let s=0;for(let i=a;i<b;i++)s+=tokens[i];
    ctx.fillStyle=colour(s/(b-a));ctx.fillRect(x,0,1,8);}}
function apply(){for(const d of document.querySelectorAll('.call'))d.classList.toggle('hidden',!shown.has(d.dataset.class));}
const wanted=decodeURIComponent(location.hash.slice(1));
for(let i=0;i<meta.count;i++){if(wanted&&load(i).id===wanted){meta.start=i;break;}}
show(meta.start);
})();
"""
