cwlVersion: v1.2
class: Workflow
doc: >
  A step scatters over files and another step of the same tool takes one of them, picked by
  an expression: both run the very same command line for that file.
requirements:
  ScatterFeatureRequirement: {}
  StepInputExpressionRequirement: {}
inputs:
  reads: File[]
outputs: {}
steps:
  count:
    run: count.cwl
    scatter: f
    in: {f: reads}
    out: [out]
  pick:
    run: count.cwl
    in:
      f: {source: reads, valueFrom: "$(self[1])"}
    out: [out]
