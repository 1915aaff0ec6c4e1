cwlVersion: v1.2
class: Workflow
requirements:
  SubworkflowFeatureRequirement: {}
inputs:
  word: string
outputs:
  out: {type: File, outputSource: tally/out}
steps:
  deep:
    run: leaf.cwl
    in: {word: word}
    out: [out]
  tally:
    run: cnt.cwl
    in: {inp: deep/out}
    out: [out]
