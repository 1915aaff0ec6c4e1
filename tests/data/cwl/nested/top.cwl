# mid.cwl, a sub-workflow around leaf.cwl (two levels deep), run three times: `first`,
# `second` and `third` run the same tools, on alpha, bravo and charlie, in an order cwltool
# shuffles; it logs the later ones' jobs as `say_2`, `say_3`.
cwlVersion: v1.2
class: Workflow
requirements:
  SubworkflowFeatureRequirement: {}
inputs:
  a: string
  b: string
  c: string
outputs:
  o1: {type: File, outputSource: first/out}
  o2: {type: File, outputSource: second/out}
  o3: {type: File, outputSource: direct/out}
  o4: {type: File, outputSource: third/out}
steps:
  first:
    run: mid.cwl
    in: {word: a}
    out: [out]
  second:
    run: mid.cwl
    in: {word: b}
    out: [out]
  third:
    run: mid.cwl
    in: {word: c}
    out: [out]
  direct:
    run: echo.cwl
    in: {word: a}
    out: [out]
