//! The page's own stylesheet and its one small script, inline: the page opens offline, from
//! a mail attachment or a cluster's scratch directory, with nothing fetched.

/// Light and dark by the reader's setting; headers wrap before a table scrolls sideways
/// (the jobs table's columns all fit 1280 pixels), tables and drawings scroll sideways in
/// their own box on a narrow screen and the page itself never does.
pub const CSS: &str = "\
:root{--fg:#222;--bg:#fff;--muted:#666;--line:#ddd;--bad:#c9302c;--good:#2e7d32;\
--bandbad:#fdecea;--bandgood:#e8f5e9;--link:#1f5fa8;--shade:#eee}\
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#16181c;--muted:#a0a0a0;\
--line:#3a3d42;--bad:#ff6b6b;--good:#7bd88f;--bandbad:#3b1f1f;--bandgood:#1d3323;\
--link:#8ab4f8;--shade:#2a2d33}}\
body{font-family:system-ui,sans-serif;margin:2em;color:var(--fg);background:var(--bg);\
line-height:1.4}\
a{color:var(--link)}h1{font-size:1.5em;overflow-wrap:anywhere}\
table{border-collapse:collapse}td,th{border-bottom:1px solid var(--line);padding:4px 8px;\
text-align:right;white-space:nowrap}td.l,th.l,td:first-child,th:first-child{text-align:left}\
th{position:sticky;top:0;background:var(--bg);white-space:normal;vertical-align:bottom}.scroll{overflow-x:auto;max-width:100%}\
.scroll.tall{max-height:85vh;overflow:auto}td.wrap,td.err{overflow-wrap:anywhere}\
.jobs th[data-k]{cursor:pointer}.jobs th[aria-sort=ascending]::after{content:' ▲'}\
.jobs th[aria-sort=descending]::after{content:' ▼'}tr.bad td{color:var(--bad)}\
tr:target td{background:var(--shade)}.err,.bad{color:var(--bad)}.good{color:var(--good)}\
.banner{padding:.6em 1em;border-radius:6px;margin:1em 0;background:var(--shade)}\
.banner.bad{background:var(--bandbad)}.banner.good{background:var(--bandgood);color:var(--fg)}\
.banner.bad strong{color:var(--bad)}.banner.good strong{color:var(--good)}\
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 1em;margin:0 0 1em}\
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere;\
font-family:ui-monospace,monospace;font-size:.9em}\
ol.findings li{margin:.3em 0;overflow-wrap:anywhere}ol.findings li.oom,ol.findings li.failure{color:var(--bad)}\
ol.findings li.oom a,ol.findings li.failure a{color:var(--bad);font-weight:bold}\
ol.findings pre.log{color:var(--fg);white-space:pre-wrap;overflow-wrap:anywhere;\
font-size:.85em;margin:.3em 0;padding:.3em .6em;background:var(--shade);border-radius:4px}\
.jobs-filter{margin:.5em 0;padding:4px 8px;width:min(30em,100%);box-sizing:border-box}\
svg{max-width:100%;height:auto}svg text{fill:var(--fg)}svg .axis{stroke:var(--line)}\
.legend span{display:inline-block;margin-right:1em}.legend i{display:inline-block;\
width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}\
.stack{display:flex;height:14px;min-width:12em;border-radius:3px;overflow:hidden;\
background:var(--shade)}.stack span{display:block;height:100%}td.bar{width:60%}\
td.wrap{white-space:normal;text-align:left;min-width:16em}td.place{white-space:normal}.note{color:var(--muted);font-size:.9em}\
code{font-family:ui-monospace,monospace;background:var(--shade);padding:0 .3em;\
border-radius:3px}\
@media (max-width:600px){body{margin:.6em}td,th{padding:3px 5px}td.wrap{min-width:8em}\
dl.facts{grid-template-columns:1fr}dl.facts dd{margin-bottom:.4em}\
.fig svg{min-width:640px}}";

/// Sorting by a column's header and filtering by text, for each run's jobs table; the table reads
/// the same without it. `?sort=KEY&desc&filter=TEXT` in the address does the same on
/// opening (a link to a view; the tests' headless browser).
pub const SCRIPT: &str = r#"(function(){
var p=new URLSearchParams(location.search);
function setup(t){
var tb=t.tBodies[0],heads=t.tHead.rows[0].cells;
var f=document.createElement('input');f.type='search';f.className='jobs-filter';
f.placeholder='filter jobs: task, tag, status, verdict';
t.parentNode.parentNode.insertBefore(f,t.parentNode);
function filter(){var q=f.value.toLowerCase();
for(var i=0;i<tb.rows.length;i++){var r=tb.rows[i];
r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0;}}
function key(r,i){var c=r.cells[i],v=c.getAttribute('data-v');
return v===null?c.textContent.toLowerCase():parseFloat(v);}
function sortBy(i,desc){var rows=Array.prototype.slice.call(tb.rows);
rows.sort(function(a,b){var x=key(a,i),y=key(b,i);
if(x===''&&y!=='')return 1;if(y===''&&x!=='')return -1;
var c=x<y?-1:x>y?1:0;return desc?-c:c;});
rows.forEach(function(r){tb.appendChild(r);});
for(var j=0;j<heads.length;j++)heads[j].removeAttribute('aria-sort');
heads[i].setAttribute('aria-sort',desc?'descending':'ascending');}
Array.prototype.forEach.call(heads,function(th,i){th.tabIndex=0;
function go(){sortBy(i,th.getAttribute('aria-sort')==='ascending');}
th.addEventListener('click',go);
th.addEventListener('keydown',function(e){if(e.key==='Enter')go();});});
f.addEventListener('input',filter);
if(p.get('sort'))for(var k=0;k<heads.length;k++)
if(heads[k].getAttribute('data-k')===p.get('sort'))sortBy(k,p.has('desc'));
if(p.get('filter')){f.value=p.get('filter');filter();}}
Array.prototype.forEach.call(document.querySelectorAll('table.jobs'),setup);
})();"#;
