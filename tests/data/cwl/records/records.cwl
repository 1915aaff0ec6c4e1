cwlVersion: v1.2
class: Workflow
doc: >
  Samples as records of a SchemaDefRequirement type, scattered over by one step, and one
  more record (of a file the scatter reads too) for another step of the same tool; a
  reference with its index as a secondary file.
requirements:
  ScatterFeatureRequirement: {}
  SchemaDefRequirement:
    types:
      - $import: sample.yml
inputs:
  samples: {type: {type: array, items: "sample.yml#Sample"}}
  best: "sample.yml#Sample"
  ref:
    type: File
    secondaryFiles: [.fai]
outputs:
  counted: {type: "File[]", outputSource: count/out}
  indexed: {type: File, outputSource: index/out}
steps:
  count:
    run: count.cwl
    scatter: s
    in: {s: samples}
    out: [out]
  index:
    run: index.cwl
    in: {ref: ref}
    out: [out]
  pair:
    run: count.cwl
    in: {s: best}
    out: [out]
