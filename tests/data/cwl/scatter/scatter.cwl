# A scatter over the job's words, then one over the files it made.
cwlVersion: v1.2
class: Workflow
requirements:
  ScatterFeatureRequirement: {}
inputs:
  words: string[]
outputs:
  finals: {type: 'File[]', outputSource: upper_each/out}
steps:
  make_each:
    run: make.cwl
    scatter: word
    in: {word: words}
    out: [out]
  upper_each:
    run: upper.cwl
    scatter: inp
    in: {inp: make_each/out}
    out: [out]
