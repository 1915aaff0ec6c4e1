# One tool scattered over the same two arrays three ways: dotproduct (3 jobs),
# flat_crossproduct and nested_crossproduct (9 jobs each, the first input slowest).
cwlVersion: v1.2
class: Workflow
requirements:
  ScatterFeatureRequirement: {}
inputs:
  xs: string[]
  ys: string[]
outputs:
  dot: {type: 'File[]', outputSource: dot/out}
  flat: {type: 'File[]', outputSource: flat/out}
  nested: {type: {type: array, items: {type: array, items: File}}, outputSource: nested/out}
steps:
  dot:
    run: pair.cwl
    scatter: [x, y]
    scatterMethod: dotproduct
    in: {x: xs, y: ys}
    out: [out]
  flat:
    run: pair.cwl
    scatter: [x, y]
    scatterMethod: flat_crossproduct
    in: {x: xs, y: ys}
    out: [out]
  nested:
    run: pair.cwl
    scatter: [x, y]
    scatterMethod: nested_crossproduct
    in: {x: xs, y: ys}
    out: [out]
